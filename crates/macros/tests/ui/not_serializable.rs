use weft::{Context, Status};

struct Opaque;

#[weft::service]
trait Calc {
    async fn double(&self, ctx: Context, n: Opaque) -> Result<i64, Status>;
}

fn main() {}
