use weft::{Context, Status};

#[weft::service]
trait Calc {
    fn double(&self, ctx: Context, n: i64) -> Result<i64, Status>;
}

fn main() {}
