//! Inputs of the stream ping-pong benches: a weft-mux stream and, as the
//! baseline, a raw tokio `LengthDelimitedCodec` connection, each over TCP
//! loopback with an echo server task on the same current-thread runtime.
//! Both send the same 7 bytes per round trip, with Nagle off.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};
use weft_mux::pipeline::{EncryptionPolicy, HandshakeConfig};
use weft_mux::{Config, Metadata, Role, Stream, connect};

/// The message of every round trip.
pub const PING: &[u8; 7] = b"pingpng";

/// A current-thread runtime with I/O and timers, as the examples use.
pub fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn plain_config() -> Config {
    let mut hs = HandshakeConfig::default();
    hs.offer.compression = false;
    hs.offer.encryption = EncryptionPolicy::Off;
    let mut c = Config::default();
    c.handshake(hs);
    c
}

async fn loopback() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
    let (client, server) = (client.expect("connect"), server.expect("accept").0);
    client.set_nodelay(true).expect("nodelay");
    server.set_nodelay(true).expect("nodelay");
    (client, server)
}

/// A client stream whose peer (a task on `rt`) echoes every chunk.
pub fn mux_stream(rt: &Runtime) -> Stream {
    rt.block_on(async {
        let (client, server) = loopback().await;
        tokio::spawn(async move {
            let (_conn, mut incoming) = connect(server, Role::Server, plain_config())
                .await
                .expect("server handshake");
            let mut st = incoming.accept().await.expect("stream");
            while let Ok(Some(c)) = st.recv().await {
                if st.send(c.data, false).await.is_err() {
                    break;
                }
            }
        });
        let (conn, _incoming) = connect(client, Role::Client, plain_config())
            .await
            .expect("client handshake");
        conn.open(Metadata::new(), Bytes::new(), false)
            .await
            .expect("open")
    })
}

/// One mux round trip: send [`PING`], receive the echo.
pub async fn mux_round_trip(st: &mut Stream) -> usize {
    st.send(Bytes::from_static(PING), false)
        .await
        .expect("send");
    st.recv().await.expect("recv").expect("echo").data.len()
}

/// The raw baseline's client side: socket, codec and buffers.
#[derive(Debug)]
pub struct RawClient {
    sock: TcpStream,
    codec: LengthDelimitedCodec,
    rbuf: BytesMut,
    wbuf: BytesMut,
}

async fn read_frame(
    sock: &mut TcpStream,
    codec: &mut LengthDelimitedCodec,
    buf: &mut BytesMut,
) -> Option<BytesMut> {
    loop {
        if let Some(f) = codec.decode(buf).expect("decode") {
            return Some(f);
        }
        if sock.read_buf(buf).await.expect("read") == 0 {
            return None;
        }
    }
}

/// A raw `LengthDelimitedCodec` client whose peer (a task on `rt`) echoes
/// every frame.
pub fn raw_client(rt: &Runtime) -> RawClient {
    rt.block_on(async {
        let (client, mut server) = loopback().await;
        tokio::spawn(async move {
            let mut codec = LengthDelimitedCodec::new();
            let mut rbuf = BytesMut::with_capacity(8192);
            let mut wbuf = BytesMut::with_capacity(8192);
            while let Some(msg) = read_frame(&mut server, &mut codec, &mut rbuf).await {
                codec.encode(msg.freeze(), &mut wbuf).expect("encode");
                if server.write_all(&wbuf).await.is_err() {
                    break;
                }
                wbuf.clear();
            }
        });
        RawClient {
            sock: client,
            codec: LengthDelimitedCodec::new(),
            rbuf: BytesMut::with_capacity(8192),
            wbuf: BytesMut::with_capacity(8192),
        }
    })
}

/// One raw round trip: send [`PING`] length-delimited, receive the echo.
pub async fn raw_round_trip(c: &mut RawClient) -> usize {
    c.codec
        .encode(Bytes::from_static(PING), &mut c.wbuf)
        .expect("encode");
    c.sock.write_all(&c.wbuf).await.expect("write");
    c.wbuf.clear();
    read_frame(&mut c.sock, &mut c.codec, &mut c.rbuf)
        .await
        .expect("echo")
        .len()
}
