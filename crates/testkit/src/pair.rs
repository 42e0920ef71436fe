//! Two real mux endpoints joined back to back in memory, and the echo
//! service every test's server runs.

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use weft_mux::{Config, Connection, Incoming, Role, Stream, StreamError, connect};

/// One endpoint: its connection handle and its accept queue.
pub type Endpoint = (Connection, Incoming);

/// Connects a client over `client_io` and a server over `server_io` (two
/// ends of one byte stream, e.g. wrapped halves of `tokio::io::duplex`),
/// both handshakes running at once.
///
/// # Panics
/// If either handshake fails.
pub async fn pair_over<A, B>(
    client_io: A,
    server_io: B,
    client: Config,
    server: Config,
) -> (Endpoint, Endpoint)
where
    A: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    B: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (c, s) = tokio::join!(
        connect(client_io, Role::Client, client),
        connect(server_io, Role::Server, server)
    );
    (c.expect("client handshake"), s.expect("server handshake"))
}

/// [`pair_over`] a `tokio::io::duplex` of `pipe` bytes each way.
pub async fn duplex_pair(pipe: usize, client: Config, server: Config) -> (Endpoint, Endpoint) {
    let (a, b) = tokio::io::duplex(pipe);
    pair_over(a, b, client, server).await
}

/// Echoes one stream: every chunk straight back as it comes (the end with
/// the last one), or an empty end if the peer ends without data. Returns
/// the bytes received, and `Ok` for a clean end or the first error of
/// either direction.
pub async fn echo(mut stream: Stream) -> (usize, Result<(), StreamError>) {
    let mut received = 0;
    let end = loop {
        let chunk = match stream.recv().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break stream.send(Bytes::new(), true).await,
            Err(e) => break Err(e),
        };
        received += chunk.data.len();
        let last = chunk.end;
        if (!chunk.data.is_empty() || last)
            && let Err(e) = stream.send(chunk.data, last).await
        {
            break Err(e);
        }
        if last {
            break Ok(());
        }
    };
    (received, end)
}

/// Accepts every stream of `incoming` and runs [`echo`] on each in its own
/// task (errors are the test's to see on the calling side), until the
/// connection ends.
pub async fn echo_all(mut incoming: Incoming) {
    while let Some(stream) = incoming.accept().await {
        tokio::spawn(echo(stream));
    }
}
