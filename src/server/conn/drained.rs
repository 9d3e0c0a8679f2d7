//! A connection's socket that reads what is left in it before it closes.
//!
//! Closing a TCP socket with bytes not read yet (a request pipelined
//! behind the answer, the rest of a body answered early) makes the kernel
//! send a reset, which also throws away what it still had to send: an
//! answer the server wrote whole, lost to a client that would have read
//! it. So on drop the socket's receive queue is read and discarded first,
//! and the close is an orderly one: the kernel sends the rest of the answer
//! and then the end of the stream. A client that keeps writing after that
//! still meets a reset, but only it loses its answers.

use std::os::fd::AsRawFd;

use tokio::net::TcpStream;

use super::forward::forward_io;

/// At most this much is read and discarded at close (a connection has at
/// most a socket buffer of it).
const DRAIN_AT_MOST: usize = 4 * 1024 * 1024;

pub(crate) struct Drained(pub TcpStream);

impl Drop for Drained {
    fn drop(&mut self) {
        let fd = self.0.as_raw_fd();
        let mut scratch = [0u8; 16 * 1024];
        let mut drained = 0;
        while drained < DRAIN_AT_MOST {
            // SAFETY: a non-blocking read into a local buffer of its length,
            // on this connection's own socket, still open here.
            let n = unsafe {
                libc::recv(
                    fd,
                    scratch.as_mut_ptr().cast(),
                    scratch.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            let Ok(n) = usize::try_from(n) else { break };
            if n == 0 {
                break;
            }
            drained += n;
        }
    }
}

forward_io!(impl AsyncRead for Drained => 0);
forward_io!(impl AsyncWrite for Drained => 0);

#[cfg(test)]
mod tests {
    use super::*;

    /// A request left unread at close: without the drain the client meets
    /// a reset and loses the answer written before it.
    #[tokio::test]
    async fn an_answer_written_before_close_reaches_a_client_whose_request_was_unread() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let mut server = Drained(server);
        client.write_all(&vec![b'x'; 64 * 1024]).await.unwrap();
        let answer = vec![b'a'; 256 * 1024];
        server.write_all(&answer).await.unwrap();
        // Let the pipelined bytes arrive, then close without reading them.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        drop(server);
        let mut got = Vec::new();
        client
            .read_to_end(&mut got)
            .await
            .expect("an orderly close");
        assert_eq!(got.len(), answer.len());
    }
}
