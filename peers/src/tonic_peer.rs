//! tonic 0.14 unary gRPC over HTTP/2 without protobuf: tonic's generic
//! `server::Grpc` and `client::Grpc` with a hand-written codec whose messages
//! are raw `Bytes`. One `Channel` (one HTTP/2 connection) carries every call.

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes};
use http::uri::PathAndQuery;
use tokio::net::TcpListener;
use tonic::body::Body;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::{Grpc as GrpcServer, UnaryService};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Response, Status};

use crate::drive::{self, Caller};
use crate::{Counts, Place, RESPONSE, Runtime, Shape, Timing};

/// The one method's path.
const PATH: &str = "/weft.peers.Ping/Ping";

/// Runs `shape` on one channel.
pub fn run(runtime: Runtime, shape: Shape, counts: Counts, place: Place) -> Timing {
    drive::run(runtime, shape, counts, connect(place))
}

impl Caller for tonic::client::Grpc<Channel> {
    fn call(&self) -> impl Future<Output = ()> + Send + '_ {
        // A `Grpc` is driven through `&mut self`: a clone per call.
        call(self.clone())
    }
}

async fn call(mut client: tonic::client::Grpc<Channel>) {
    client.ready().await.expect("channel ready");
    let response: Response<Bytes> = client
        .unary(
            Request::new(Bytes::new()),
            PathAndQuery::from_static(PATH),
            BytesCodec,
        )
        .await
        .expect("tonic call");
    assert_eq!(&response.into_inner()[..], RESPONSE);
}

/// The server alone (split layout).
pub fn server() -> Pin<Box<dyn Future<Output = SocketAddr> + Send>> {
    Box::pin(start())
}

/// Starts the server on the current runtime.
async fn start() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    tokio::spawn(async move {
        Server::builder()
            .serve_with_incoming(PingService, incoming)
            .await
            .expect("tonic server");
    });
    addr
}

async fn connect(place: Place) -> tonic::client::Grpc<Channel> {
    let addr = place.addr(start()).await;
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint uri")
        .tcp_nodelay(true)
        .connect()
        .await
        .expect("connect");
    tonic::client::Grpc::new(channel)
}

/// The HTTP service: routes [`PATH`] to [`PingMethod`], anything else to
/// UNIMPLEMENTED (what tonic's generated code does).
#[derive(Clone, Copy, Debug)]
struct PingService;

impl tower_service::Service<http::Request<Body>> for PingService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if request.uri().path() == PATH {
            Box::pin(
                async move { Ok(GrpcServer::new(BytesCodec).unary(PingMethod, request).await) },
            )
        } else {
            Box::pin(async move { Ok(Status::unimplemented("no such method").into_http()) })
        }
    }
}

/// The unary method: ignores the nil request, answers [`RESPONSE`].
#[derive(Clone, Copy, Debug)]
struct PingMethod;

impl UnaryService<Bytes> for PingMethod {
    type Response = Bytes;
    type Future = Ready<Result<Response<Bytes>, Status>>;

    fn call(&mut self, _request: Request<Bytes>) -> Self::Future {
        ready(Ok(Response::new(Bytes::from_static(RESPONSE))))
    }
}

/// A codec whose messages are the raw message bytes (no protobuf).
#[derive(Clone, Copy, Debug, Default)]
struct BytesCodec;

impl Codec for BytesCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = BytesCodec;
    type Decoder = BytesCodec;

    fn encoder(&mut self) -> Self::Encoder {
        BytesCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        BytesCodec
    }
}

impl Encoder for BytesCodec {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for BytesCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}
