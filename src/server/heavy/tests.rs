use super::*;

use std::sync::atomic::{AtomicBool, Ordering};

fn ip(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

fn charge(last: u8, bytes: usize) -> Charge {
    Charge {
        peer: ip(last),
        bytes,
    }
}

/// Blocks the pool's thread until the returned sender is used (or dropped).
async fn hold(pool: &Arc<Heavy>) -> (std::sync::mpsc::Sender<()>, tokio::task::JoinHandle<()>) {
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let (started, running) = std::sync::mpsc::channel::<()>();
    let busy = {
        let pool = pool.clone();
        tokio::spawn(async move {
            pool.run(None, move || {
                started.send(()).unwrap();
                let _ = gate.recv();
            })
            .await
            .unwrap();
        })
    };
    while running.try_recv().is_err() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (release, busy)
}

#[tokio::test]
async fn runs_work_off_the_caller_and_skips_what_nobody_waits_for() {
    let pool = Arc::new(Heavy::start("test-pool", true).unwrap());
    let caller = std::thread::current().id();
    let ran_on = pool
        .run(None, || std::thread::current().id())
        .await
        .unwrap();
    assert_ne!(ran_on, caller);
    // The pool is busy; the next job's caller gives up before it runs.
    let (release, busy) = hold(&pool).await;
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let skipped = pool.run(Some(charge(1, 1)), move || {
        flag.store(true, Ordering::SeqCst);
    });
    let gave_up = tokio::time::timeout(Duration::from_millis(50), skipped).await;
    assert!(gave_up.is_err(), "queued behind the busy job");
    release.send(()).unwrap();
    busy.await.unwrap();
    assert_eq!(pool.run(None, || 7).await.unwrap(), 7);
    assert!(!ran.load(Ordering::SeqCst), "given up, so never run");
    // A panic reaches the caller; the pool carries on.
    let pool2 = pool.clone();
    let panicked = tokio::spawn(async move { pool2.run(None, || panic!("boom")).await }).await;
    assert!(panicked.unwrap_err().is_panic());
    assert_eq!(pool.run(None, || 8).await.unwrap(), 8);
}

#[tokio::test]
async fn the_lighter_client_and_the_smaller_job_go_next() {
    let pool = Arc::new(Heavy::start("test-pool", false).unwrap());
    // Address 2 has just had 5 MB reviewed.
    pool.run(Some(charge(2, 5_000_000)), || {}).await.unwrap();
    let (release, busy) = hold(&pool).await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut queued = Vec::new();
    // Address 2 queues first; then 3 with a larger review than 4's.
    for (last, bytes) in [(2, 100_000), (2, 100_000), (3, 2_000_000), (4, 128_000)] {
        let (pool, order) = (pool.clone(), order.clone());
        queued.push(tokio::spawn(async move {
            pool.run(Some(charge(last, bytes)), move || {
                order.lock().unwrap().push(last);
            })
            .await
            .unwrap();
        }));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    release.send(()).unwrap();
    busy.await.unwrap();
    for q in queued {
        q.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [4, 3, 2, 2]);
}

#[test]
fn a_charge_halves_every_half_life() {
    let now = Instant::now();
    let mut charges = Charges::default();
    charges.charge(ip(1), 8e6, now);
    assert!((charges.key(Some(charge(1, 1000)), now) - 8_001_000.0).abs() < 1.0);
    let later = now + 2 * HALF_LIFE;
    assert!((charges.now(Some(ip(1)), later) - 2e6).abs() < 1.0);
    assert!(charges.now(Some(ip(2)), later).abs() < f64::EPSILON);
    assert!(charges.now(None, later).abs() < f64::EPSILON);
}
