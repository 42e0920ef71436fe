//! What a user of the facade alone can name: every handle type a call
//! returns, every status constructor, and serde for typed messages, without
//! a direct dependency on weft-rpc or serde.

use weft::serde::{Deserialize, Serialize};
use weft::{BidiCall, BidiReceiver, BidiSender, Code, Config, Context, Router, Status};

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[serde(crate = "weft::serde")]
struct Note {
    text: String,
}

#[weft::service(package = "notes")]
trait Notes {
    async fn echo(&self, ctx: Context, note: Note) -> Result<Note, Status>;
}

struct Impl;
impl Notes for Impl {
    async fn echo(&self, _ctx: Context, note: Note) -> Result<Note, Status> {
        if note.text.is_empty() {
            return Err(Status::failed_precondition("empty note"));
        }
        Ok(note)
    }
}

#[tokio::test]
async fn a_typed_service_with_serde_from_the_facade_alone() {
    let router = Router::new().add_service(NotesServer::new(Impl));
    let client = NotesClient::new(weft::memory(router, &Config::new()).await.unwrap());
    let hi = Note { text: "hi".into() };
    assert_eq!(client.echo(Note { text: "hi".into() }).await.unwrap(), hi);
    let err = client
        .echo(Note {
            text: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FAILED_PRECONDITION);
    assert_eq!(err.message(), "empty note");
}

#[tokio::test]
async fn a_split_bidi_call_names_its_halves_through_the_facade() {
    let router = Router::new().bidi("echo", |_ctx, mut s: weft::BidiStream| async move {
        while let Some(m) = s.message().await? {
            s.send(m).await?;
        }
        Ok(())
    });
    let client = weft::memory(router, &Config::new()).await.unwrap();
    let call: BidiCall = client.bidi("echo", &Default::default()).await.unwrap();
    let (mut tx, mut rx): (BidiSender, BidiReceiver) = call.split();
    tx.send(weft::Bytes::from_static(b"x")).await.unwrap();
    tx.close_send().await.unwrap();
    assert_eq!(rx.message().await.unwrap().unwrap(), "x");
    assert_eq!(rx.message().await.unwrap(), None);
}
