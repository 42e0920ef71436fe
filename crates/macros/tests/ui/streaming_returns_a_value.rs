use weft::{Context, Responses, Status};

#[weft::service]
trait Calc {
    async fn count(&self, ctx: Context, n: u32, out: Responses<u32>) -> Result<u32, Status>;
}

fn main() {}
