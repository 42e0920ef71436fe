//! The expansion, run in-process: what each shape generates and each
//! misuse reports (trybuild checks the same through rustc, with spans).

use quote::quote;

use crate::expand::expand;
use crate::model::Options;

fn run(args: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> Result<String, String> {
    let opts = Options::parse(args).map_err(|e| e.to_string())?;
    let item: syn::ItemTrait = syn::parse2(item).map_err(|e| e.to_string())?;
    let out = expand(item, &opts).map_err(|e| e.to_string())?;
    let text = out.to_string();
    match text.find("compile_error") {
        Some(_) => Err(text),
        None => Ok(text),
    }
}

#[test]
fn every_shape_expands_to_its_router_and_client_calls() {
    let out = run(
        quote!(package = "p.v1", codec = my::Codec, rpc = ::weft_rpc),
        quote! {
            pub trait Svc {
                /// docs travel to the client
                async fn get_one(&self, ctx: Context, r: u32) -> Result<u64, Status>;
                #[weft(idempotent)]
                async fn many(&self, ctx: Context, r: u32, out: Responses<u8>) -> Result<(), Status>;
                #[weft(codec = other::Raw)]
                async fn up(&self, _ctx: Context, rx: Requests<Bytes>) -> Result<Bytes, Status>;
                #[weft(name = "/P.V1.Svc//Chat/")]
                async fn chat(&self, ctx: Context, rx: Requests<String>, tx: Responses<String>) -> Result<(), Status>;
            }
        },
    )
    .unwrap();
    for want in [
        "Caller :: call_unary",
        "Caller :: call_server_streaming",
        "Caller :: call_client_streaming",
        "Caller :: call_bidi",
        "SvcClient < C = :: weft_rpc :: Client >",
        "const GET_ONE : & 'static str = \"p.v1.Svc/GetOne\"",
        "const MANY : & 'static str = \"p.v1.Svc/Many\"",
        "const CHAT : & 'static str = \"P.V1.Svc/Chat\"",
        "pub enum SvcMethods { }",
        "call_unary :: < _ , u32 , u64 > (& self . inner , SvcMethods :: GET_ONE",
        "unary_method :: < _ , _ , _ , u32 , u64 > (SvcMethods :: GET_ONE",
        "UnaryMethod < S , u32 , u64 > for __WeftMethod",
        "S :: get_one (service , ctx , request)",
        "SvcClient",
        "SvcServer",
        "get_one_with",
        "get_one_response",
        "call_unary_response",
        "docs travel to the client",
        "other :: Raw",
        "my :: Codec",
        ":: weft_rpc :: IntoRoutes",
        ":: core :: marker :: Send",
    ] {
        assert!(out.contains(want), "{want} missing from {out}");
    }
    assert!(
        !out.contains("async fn get_one"),
        "trait methods become Send futures"
    );
    // Only the idempotent method marks its calls.
    assert_eq!(
        out.matches("CallOptions :: to_idempotent (opts)").count(),
        1,
        "{out}"
    );
}

#[test]
fn defaults_name_the_trait_and_json() {
    let out = run(
        quote!(),
        quote!(
            trait Calc {
                async fn add(&self, ctx: weft::Context, r: (i64, i64)) -> Result<i64, Status>;
            }
        ),
    )
    .unwrap();
    assert!(out.contains("\"Calc/Add\""), "{out}");
    assert!(out.contains(":: weft :: rpc :: Json"), "{out}");
}

#[test]
fn misuse_is_reported() {
    let cases = [
        (
            quote!(nope = 1),
            quote!(
                trait T {}
            ),
            "expected `package",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    const X: u8;
                }
            ),
            "only `async fn`",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    fn f(&self, c: Context, r: u8) -> Result<u8, Status>;
                }
            ),
            "`async fn`",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f<X>(&self, c: Context, r: X) -> Result<u8, Status>;
                }
            ),
            "generic",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f(&self, c: Context, r: u8) -> Result<u8, Status> {
                        todo!()
                    }
                }
            ),
            "default body",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f(c: Context, r: u8) -> Result<u8, Status>;
                }
            ),
            "`&self` first",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f(&mut self, c: Context, r: u8) -> Result<u8, Status>;
                }
            ),
            "`&self` first",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f(&self, r: u8) -> Result<u8, Status>;
                }
            ),
            "`Context`",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f(&self) -> Result<u8, Status>;
                }
            ),
            "`Context`",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f(&self, c: Context, (a, b): (u8, u8)) -> Result<u8, Status>;
                }
            ),
            "`name: Type`",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f(&self, c: Context, r: u8) -> u8;
                }
            ),
            "returns `Result<T, Status>`",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f(&self, c: Context, r: u8);
                }
            ),
            "returns `Result<T, Status>`",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f(&self, c: Context) -> Result<u8, Status>;
                }
            ),
            "expected `(&self",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f(&self, c: Context, a: u8, b: u8) -> Result<u8, Status>;
                }
            ),
            "expected `(&self",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f(&self, c: Context, o: Responses<u8>) -> Result<(), Status>;
                }
            ),
            "expected `(&self",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f(&self, c: Context, r: u8, o: Responses<u8>) -> Result<u8, Status>;
                }
            ),
            "Result<(), Status>",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f(&self, c: Context, r: Requests) -> Result<u8, Status>;
                }
            ),
            "name the message type",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    #[weft(nam = "x")]
                    async fn f(&self, c: Context, r: u8) -> Result<u8, Status>;
                }
            ),
            "expected `name",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    #[weft(name = "a b")]
                    async fn f(&self, c: Context, r: u8) -> Result<u8, Status>;
                }
            ),
            "not a weft method name",
        ),
        (
            quote!(package = "é"),
            quote!(
                trait T {
                    async fn f(&self, c: Context, r: u8) -> Result<u8, Status>;
                }
            ),
            "not a weft method name",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f(&self, c: Context, r: u8) -> Result<u8, Status>;
                    #[weft(name = "T/F")]
                    async fn g(&self, c: Context, r: u8) -> Result<u8, Status>;
                }
            ),
            "also used by `f`",
        ),
        (
            quote!(),
            quote!(
                trait T {
                    async fn f(&self, c: Context, r: u8) -> Result<u8, Status>;
                    #[weft(name = "t/f")]
                    async fn g(&self, c: Context, r: u8) -> Result<u8, Status>;
                }
            ),
            "names differing only in case are one method",
        ),
    ];
    for (args, item, want) in cases {
        let e = run(args.clone(), item.clone()).unwrap_err();
        assert!(e.contains(want), "{item}: wanted {want:?}, got {e}");
    }
}
