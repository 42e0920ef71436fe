use weft::{Context, Responses, Status};

struct Opaque;

// Opaque is neither Serialize nor Deserialize: one error for each missing
// trait, at its first use, however many methods carry it.
#[weft::service]
trait Calc {
    async fn double(&self, ctx: Context, n: Opaque) -> Result<i64, Status>;
    async fn triple(&self, ctx: Context, n: Opaque) -> Result<Opaque, Status>;
    async fn watch(&self, ctx: Context, n: i64, out: Responses<Opaque>) -> Result<(), Status>;
}

fn main() {}
