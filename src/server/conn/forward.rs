//! Delegation of a connection wrapper's I/O to the stream it wraps, for
//! the methods the wrapper does not change. Each method forwards as is,
//! vectored writes included, so a wrapper costs no extra call shape.

/// `impl AsyncRead` and/or `impl AsyncWrite for $ty` that forward every
/// method to the field `$field` (an `Unpin` stream).
macro_rules! forward_io {
    (impl AsyncRead for $ty:ty => $field:tt) => {
        impl tokio::io::AsyncRead for $ty {
            fn poll_read(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                tokio::io::AsyncRead::poll_read(std::pin::Pin::new(&mut self.$field), cx, buf)
            }
        }
    };
    (impl AsyncWrite for $ty:ty => $field:tt) => {
        impl tokio::io::AsyncWrite for $ty {
            fn poll_write(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                tokio::io::AsyncWrite::poll_write(std::pin::Pin::new(&mut self.$field), cx, buf)
            }

            fn poll_write_vectored(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                tokio::io::AsyncWrite::poll_write_vectored(
                    std::pin::Pin::new(&mut self.$field),
                    cx,
                    bufs,
                )
            }

            fn is_write_vectored(&self) -> bool {
                tokio::io::AsyncWrite::is_write_vectored(&self.$field)
            }

            fn poll_flush(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                tokio::io::AsyncWrite::poll_flush(std::pin::Pin::new(&mut self.$field), cx)
            }

            fn poll_shutdown(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                tokio::io::AsyncWrite::poll_shutdown(std::pin::Pin::new(&mut self.$field), cx)
            }
        }
    };
}

pub(crate) use forward_io;
