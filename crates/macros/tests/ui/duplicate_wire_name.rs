use weft::{Context, Status};

#[weft::service]
trait Calc {
    async fn double(&self, ctx: Context, n: i64) -> Result<i64, Status>;
    #[weft(name = "Calc/Double")]
    async fn twice(&self, ctx: Context, n: i64) -> Result<i64, Status>;
}

fn main() {}
