//! The reference payload of the transform and end-to-end targets.

/// About 1.3 KiB of JSON: an array of repeated small objects, the reference
/// payload of the transform targets (docs/BENCHMARKS.md).
pub fn json_reference() -> Vec<u8> {
    let mut out = b"[".to_vec();
    for id in 0..36 {
        if id > 0 {
            out.push(b',');
        }
        out.extend_from_slice(format!(r#"{{"id":{id},"name":"task","done":false}}"#).as_bytes());
    }
    out.push(b']');
    out
}

/// The end-to-end targets' response body: 7 bytes of JSON.
pub const E2E_RESPONSE: &[u8] = b"{\"n\":1}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_payload_is_about_1300_bytes_of_json_objects() {
        let json = json_reference();
        assert!((1250..=1350).contains(&json.len()), "{} bytes", json.len());
        assert!(json.starts_with(b"[{\"id\":0,"));
        assert!(json.ends_with(b"}]"));
    }
}
