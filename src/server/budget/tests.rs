use super::*;

use std::convert::Infallible;

use futures_util::stream;
use http_body_util::StreamBody;
use hyper::body::Frame;
use tokio::sync::mpsc;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

fn body(bytes: &'static [u8]) -> Body {
    Body::from(bytes)
}

/// A body whose chunks the test sends when it likes; it ends when the
/// sender is dropped.
fn streamed() -> (mpsc::UnboundedSender<Bytes>, Body) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Bytes>();
    let frames = stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|chunk| chunk.map(|c| Ok::<_, Infallible>(Frame::data(c))))
    });
    (tx, Body::new(StreamBody::new(frames)))
}

fn send(tx: &mpsc::UnboundedSender<Bytes>, bytes: usize, chunk: usize) {
    for _ in 0..bytes / chunk {
        tx.send(Bytes::from(vec![b' '; chunk])).unwrap();
    }
}

/// A budget of `total` bytes, with the gauges of its buffered bodies and
/// of its held answers.
fn budget(total: usize) -> (Arc<BodyBudget>, Gauge, Gauge) {
    let (buffered, answers) = (Gauge::default(), Gauge::default());
    let total = u64::try_from(total).unwrap();
    let budget = BodyBudget::new(total, buffered.clone(), answers.clone());
    (Arc::new(budget), buffered, answers)
}

async fn until(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..500 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn small_bodies_flow_while_large_ones_hold_their_pool() {
    let (budget, _, _) = budget(16 * MIB);
    let (small, large) = budget.available();
    assert_eq!((small, large), (4 * MIB, 12 * MIB));

    // A large body that needs more than the large pool has free waits...
    let big = vec![b'x'; 7 * MIB];
    let first = budget
        .read(Body::from(big.clone()), Some(big.len() as u64))
        .await
        .unwrap();
    let waiting = tokio::time::timeout(
        Duration::from_millis(100),
        budget.read(Body::from(big.clone()), Some(big.len() as u64)),
    )
    .await;
    assert!(waiting.is_err(), "the second 7 MiB body must wait");

    // ...while a small review is read at once.
    let (bytes, _r) = tokio::time::timeout(
        Duration::from_millis(100),
        budget.read(body(b"{\"small\":1}"), Some(11)),
    )
    .await
    .expect("small body not starved")
    .unwrap();
    assert_eq!(&bytes[..], b"{\"small\":1}");

    drop(first);
    assert_eq!(budget.available().1, 12 * MIB);
}

#[tokio::test]
async fn reservations_are_released_and_limits_hold() {
    let (budget, buffered, _) = budget(16 * MIB);
    let full = budget.available();
    {
        let (_b, _r) = budget.read(body(b"abc"), None).await.unwrap();
        assert_eq!(budget.available().0, full.0 - 3);
        assert_eq!(buffered.get(), 3);
    }
    assert_eq!(budget.available(), full);
    assert_eq!(buffered.get(), 0);
    // A body longer than it declared is refused, not buffered.
    assert!(matches!(
        budget.read(body(b"abcdef"), Some(3)).await,
        Err(BodyError::TooLarge)
    ));
    assert_eq!(budget.available(), full);
    assert_eq!(buffered.get(), 0);
}

#[tokio::test]
async fn a_body_is_charged_for_what_arrived_not_for_what_it_declares() {
    let (budget, buffered, _) = budget(16 * MIB);
    let full = budget.available();
    let (tx, stalled) = streamed();
    let reading = {
        let budget = budget.clone();
        tokio::spawn(async move {
            let (bytes, _r) = budget.read(stalled, Some(256 * 1024)).await?;
            Ok::<_, BodyError>(bytes.len())
        })
    };
    tx.send(Bytes::from_static(b"{")).unwrap();
    until("the first byte is charged", || buffered.get() == 1).await;
    assert_eq!(budget.available(), (full.0 - 1, full.1));

    // The rest arrives in chunks; the whole body is read and then released.
    send(&tx, 256 * KIB - 16 * KIB, 16 * KIB);
    tx.send(Bytes::from(vec![b' '; 16 * KIB - 1])).unwrap();
    drop(tx);
    assert_eq!(reading.await.unwrap().unwrap(), 256 * KIB);
    assert_eq!(budget.available(), full);
    assert_eq!(buffered.get(), 0);
}

#[tokio::test]
async fn the_slowest_stalled_bodies_are_shed_for_a_new_one() {
    // A small pool of 1 MiB.
    let (budget, buffered, _) = budget(4 * MIB);
    let mut stalled = Vec::new();
    for i in 0..5 {
        let (tx, body) = streamed();
        let budget = budget.clone();
        let read =
            tokio::spawn(
                async move { budget.read(body, Some(250 * KIB as u64)).await.map(|_| ()) },
            );
        // The slowest sends least: 100, 120, ... 180 KiB.
        send(&tx, (100 + 20 * i) * KIB, 4 * KIB);
        stalled.push((tx, read));
    }
    until("the stalled bodies are charged", || {
        budget.available().0 < 200 * KIB
    })
    .await;
    // Too young to be judged: a new body waits.
    let (tx, first) = streamed();
    send(&tx, 100 * KIB, 100 * KIB);
    drop(tx);
    let young = tokio::time::timeout(Duration::from_millis(20), budget.read(first, None)).await;
    assert!(
        young.is_err(),
        "bodies younger than {SHED_MIN_AGE:?} are not shed"
    );

    // Once they average less than 1 MiB/s, a new body sheds the slowest
    // as soon as it arrives.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let (tx, fresh) = streamed();
    send(&tx, 200 * KIB, 200 * KIB);
    drop(tx);
    let (bytes, reservation) =
        tokio::time::timeout(Duration::from_millis(50), budget.read(fresh, None))
            .await
            .expect("a fresh body is not kept waiting by stalled ones")
            .unwrap();
    assert_eq!(bytes.len(), 200 * KIB);
    // The shed bodies' reads wake up and answer.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut shed = Vec::new();
    for (i, (tx, read)) in stalled.into_iter().enumerate() {
        if read.is_finished() {
            assert!(matches!(read.await.unwrap(), Err(BodyError::Shed)));
            shed.push(i);
        }
        drop(tx);
    }
    assert_eq!(shed, [0, 1], "the two slowest bodies make room for 200 KiB");
    drop(reservation);
    // Everything charged is released once the bodies are gone.
    until("all released", || buffered.get() == 0).await;
    assert_eq!(budget.available(), (MIB, 3 * MIB));
}

#[tokio::test]
async fn bodies_that_wait_for_each_other_do_not_wait_until_their_deadline() {
    // A large pool of 3 MiB, and three 2 MiB bodies that each get half in:
    // every one needs more than is left, and waits for the others.
    let (budget, buffered, _) = budget(4 * MIB);
    let mut reads = Vec::new();
    let mut senders = Vec::new();
    for _ in 0..3 {
        let (tx, body) = streamed();
        let budget = budget.clone();
        reads.push(tokio::spawn(async move {
            budget.read(body, Some(2 * MIB as u64)).await.map(|_| ())
        }));
        send(&tx, MIB, 64 * KIB);
        senders.push(tx);
    }
    until("the large pool is taken by the three halves", || {
        budget.available().1 == 0
    })
    .await;
    for tx in &senders {
        send(tx, MIB, 64 * KIB);
    }
    drop(senders);
    let started = Instant::now();
    let mut completed = 0;
    for read in reads {
        let result = tokio::time::timeout(Duration::from_secs(4), read)
            .await
            .expect("no body waits until the deadline")
            .unwrap();
        match result {
            Ok(()) => completed += 1,
            Err(e) => assert!(matches!(e, BodyError::Shed), "{e}"),
        }
    }
    assert!(completed >= 1, "at least one body completes");
    eprintln!("{completed} of 3 completed in {:?}", started.elapsed());
    // What the shed bodies gathered while they waited is given back too.
    assert_eq!(buffered.get(), 0);
    assert_eq!(budget.available(), (MIB, 3 * MIB));
}

#[tokio::test]
async fn an_answer_takes_over_its_bodys_charge() {
    let (budget, buffered, answers) = budget(16 * MIB);
    let (bytes, charge) = budget
        .read(body(b"{\"review\":1}"), Some(12))
        .await
        .unwrap();
    assert_eq!((buffered.get(), answers.get()), (12, 0));
    drop(bytes);
    let small = charge.into_answer(5, None).await.unwrap();
    assert_eq!((buffered.get(), answers.get()), (0, 5), "shrunk");
    let (_, charge) = budget.read(body(b"{}"), Some(2)).await.unwrap();
    let large = charge.into_answer(MIB, None).await.unwrap();
    assert_eq!(
        answers.get(),
        5 + i64::try_from(MIB).unwrap(),
        "grown into the large pool"
    );
    assert_eq!(budget.available(), (4 * MIB - 5, 12 * MIB - MIB));
    // Over 16 KiB, an answer leaves the small pool, even when it is
    // smaller than its body.
    let (_, charge) = budget
        .read(Body::from(vec![b' '; 100 * KIB]), None)
        .await
        .unwrap();
    assert_eq!(budget.available().0, 4 * MIB - 5 - 100 * KIB, "the body");
    let moved = charge.into_answer(50 * KIB, None).await.unwrap();
    assert_eq!(budget.available(), (4 * MIB - 5, 11 * MIB - 50 * KIB));
    drop((small, large, moved));
    assert_eq!((buffered.get(), answers.get()), (0, 0));
    assert_eq!(budget.available(), (4 * MIB, 12 * MIB));
}

#[tokio::test]
async fn an_answer_short_of_budget_closes_connections_that_leave_theirs_unread() {
    use super::super::conn::{ANSWER_GRACE, ConnState};
    // A large pool of 3 MiB.
    let (budget, _, answers) = budget(4 * MIB);
    let answering = || {
        let conn = ConnState::new();
        conn.request_began();
        conn.answering();
        conn
    };
    let unread = answering();
    let (_, charge) = budget.read(body(b"{}"), Some(2)).await.unwrap();
    let held = charge
        .into_answer(2 * MIB, Some(unread.clone()))
        .await
        .unwrap();
    // Within the grace the answer is being taken: nothing is closed, the
    // next answer waits.
    let reader = answering();
    let (_, charge) = budget.read(body(b"{}"), Some(2)).await.unwrap();
    let waits = tokio::time::timeout(
        Duration::from_millis(100),
        charge.into_answer(2 * MIB, Some(reader.clone())),
    )
    .await;
    assert!(waits.is_err(), "no room yet");
    tokio::time::sleep(ANSWER_GRACE).await;
    let (_, charge) = budget.read(body(b"{}"), Some(2)).await.unwrap();
    let next = tokio::spawn(charge.into_answer(2 * MIB, Some(reader)));
    tokio::time::timeout(Duration::from_secs(5), unread.closed_by_server())
        .await
        .expect("the unread answer's connection is closed");
    // Its connection ends, and with it the answer and its charge.
    drop(held);
    let next = tokio::time::timeout(Duration::from_secs(5), next)
        .await
        .expect("charged once the room is free")
        .unwrap()
        .unwrap();
    assert_eq!(answers.get(), 2 * i64::try_from(MIB).unwrap());
    drop(next);
    assert_eq!(answers.get(), 0);
}
