use weft::Status;

#[weft::service]
trait Calc {
    async fn double(&self, n: i64) -> Result<i64, Status>;
}

fn main() {}
