//! tarpc 0.38 with its serde transport (bincode over a length-delimited
//! TCP stream, nodelay), `BaseChannel` spawning each request, the stock
//! client. The service returns the 7-byte body as a `String`.

use std::net::SocketAddr;
use std::pin::Pin;

use futures_util::StreamExt;
use tarpc::server::{BaseChannel, Channel};
use tarpc::tokio_serde::formats::Bincode;
use tarpc::{client, context, serde_transport};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::LengthDelimitedCodec;

use crate::drive::{self, Caller};
use crate::{Counts, Place, RESPONSE, Runtime, Shape, Timing};

/// The benchmark service: a nil request, a 7-byte response.
#[tarpc::service]
pub trait Ping {
    /// Returns `{"n":1}`.
    async fn ping() -> String;
}

#[derive(Clone, Debug)]
struct PingServer;

impl Ping for PingServer {
    async fn ping(self, _: context::Context) -> String {
        // An owned String per call is what a tarpc String response costs.
        String::from_utf8_lossy(RESPONSE).into_owned()
    }
}

/// Runs `shape` on one client.
pub fn run(runtime: Runtime, shape: Shape, counts: Counts, place: Place) -> Timing {
    drive::run(runtime, shape, counts, connect(place))
}

impl Caller for PingClient {
    fn call(&self) -> impl Future<Output = ()> + Send + '_ {
        call(self)
    }
}

async fn call(client: &PingClient) {
    let body = client.ping(context::current()).await.expect("tarpc call");
    assert_eq!(body.as_bytes(), RESPONSE);
}

/// The server alone (split layout).
pub fn server() -> Pin<Box<dyn Future<Output = SocketAddr> + Send>> {
    Box::pin(start())
}

/// Starts the server on the current runtime, a channel per connection.
async fn start() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            stream.set_nodelay(true).expect("nodelay");
            let framed = LengthDelimitedCodec::builder().new_framed(stream);
            let transport = serde_transport::new(framed, Bincode::default());
            tokio::spawn(
                BaseChannel::with_defaults(transport)
                    .execute(PingServer.serve())
                    .for_each(|response| async move {
                        tokio::spawn(response);
                    }),
            );
        }
    });
    addr
}

async fn connect(place: Place) -> PingClient {
    let addr = place.addr(start()).await;
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let framed = LengthDelimitedCodec::builder().new_framed(stream);
    let transport = serde_transport::new(framed, Bincode::default());
    PingClient::new(client::Config::default(), transport).spawn()
}
