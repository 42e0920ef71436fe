use weft::{Context, Status};

#[weft::service]
trait Calc {
    #[weft(name = "calc/../double")]
    async fn double(&self, ctx: Context, n: i64) -> Result<i64, Status>;
}

fn main() {}
