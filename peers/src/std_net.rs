//! The floor: a blocking std::net ping-pong with a 4-byte big-endian length
//! prefix. The server is one thread; concurrency is pipelining (write
//! `inflight` requests, then read `inflight` responses) on one connection.
//! No tokio runtime is involved: the [`Runtime`] argument is ignored.

use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::pin::Pin;
use std::thread;
use std::time::{Duration, Instant};

use crate::{Counts, Place, RESPONSE, Runtime};

/// Times batches of `inflight` pipelined calls.
pub fn run_batches(_: Runtime, counts: Counts, inflight: usize, place: Place) -> Vec<Duration> {
    with_connection(place, |client| {
        let mut samples = Vec::with_capacity(counts.timed);
        for i in 0..counts.warm_up + counts.timed {
            let start = Instant::now();
            client.call(inflight)?;
            if i >= counts.warm_up {
                samples.push(start.elapsed());
            }
        }
        Ok(samples)
    })
}

struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    requests: Vec<u8>,
    body: Vec<u8>,
}

impl Client {
    /// Writes `count` nil requests in one write, then reads `count` responses.
    fn call(&mut self, count: usize) -> io::Result<()> {
        self.requests.resize(count * 4, 0);
        self.writer.write_all(&self.requests)?;
        for _ in 0..count {
            read_frame(&mut self.reader, &mut self.body)?;
            if self.body != RESPONSE {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "bad response"));
            }
        }
        Ok(())
    }
}

/// The server alone (split layout): a thread accepting, a thread per
/// connection.
pub fn server() -> Pin<Box<dyn Future<Output = SocketAddr> + Send>> {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    thread::spawn(move || {
        while let Ok((stream, _)) = listener.accept() {
            thread::spawn(move || serve(stream));
        }
    });
    Box::pin(std::future::ready(addr))
}

fn with_connection(
    place: Place,
    measure: impl FnOnce(&mut Client) -> io::Result<Vec<Duration>>,
) -> Vec<Duration> {
    let (addr, server) = match place {
        Place::At(addr) => (addr, None),
        Place::InProcess => {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
            let addr = listener.local_addr().expect("local addr");
            let server = thread::spawn(move || -> io::Result<()> {
                let (stream, _) = listener.accept()?;
                serve(stream)
            });
            (addr, Some(server))
        }
    };
    let stream = TcpStream::connect(addr).expect("connect loopback");
    stream.set_nodelay(true).expect("nodelay");
    let mut client = Client {
        reader: BufReader::new(stream.try_clone().expect("clone stream")),
        writer: stream,
        requests: Vec::new(),
        body: Vec::new(),
    };
    let samples = measure(&mut client).expect("std-net peer failed");
    drop(client); // EOF ends the server loop
    if let Some(server) = server {
        server.join().expect("server thread").expect("server I/O");
    }
    samples
}

/// Answers each request; flushes when no further request is already buffered,
/// so a pipelined batch gets its responses in few writes.
fn serve(stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = BufWriter::new(stream);
    let mut body = Vec::new();
    let mut response = Vec::with_capacity(4 + RESPONSE.len());
    response.extend_from_slice(&(RESPONSE.len() as u32).to_be_bytes());
    response.extend_from_slice(RESPONSE);
    loop {
        if reader.buffer().is_empty() {
            writer.flush()?;
        }
        match read_frame(&mut reader, &mut body) {
            Ok(()) => writer.write_all(&response)?,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

fn read_frame(reader: &mut BufReader<TcpStream>, body: &mut Vec<u8>) -> io::Result<()> {
    if reader.fill_buf()?.is_empty() {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    let mut len = [0; 4];
    reader.read_exact(&mut len)?;
    body.resize(u32::from_be_bytes(len) as usize, 0);
    reader.read_exact(body)
}
