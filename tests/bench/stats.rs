//! Latency sampling and reporting shared by the benchmarks.

use handoff_tests::Mcp;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

pub fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT MET"
    }
}

/// `GET /health` at `url` as a call for [`measure`]: wrangler dev's floor (no storage).
pub fn health(
    url: String,
) -> impl Fn(Arc<Mcp>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Clone + Send + 'static {
    move |mcp: Arc<Mcp>| {
        let url = url.clone();
        Box::pin(async move {
            let response = mcp.http.get(&url).send().await.expect("GET /health");
            assert_eq!(response.status().as_u16(), 200);
            response.bytes().await.expect("body");
        })
    }
}

pub struct Figures {
    pub p50: f64,
    pub p99: f64,
    pub per_second: f64,
}

/// Runs `call` `per_client` times on each of `clients` concurrent clients (after a warm-up).
pub async fn measure<F, Fut>(mcp: &Arc<Mcp>, clients: usize, per_client: usize, call: F) -> Figures
where
    F: Fn(Arc<Mcp>) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    for _ in 0..20 {
        call(mcp.clone()).await;
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let mcp = mcp.clone();
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::with_capacity(per_client);
            for _ in 0..per_client {
                let t = Instant::now();
                call(mcp.clone()).await;
                samples.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            samples
        }));
    }
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await.expect("client"));
    }
    let wall = started.elapsed().as_secs_f64();
    samples.sort_by(f64::total_cmp);
    let pick = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    Figures {
        p50: pick(0.50),
        p99: pick(0.99),
        per_second: samples.len() as f64 / wall,
    }
}

pub fn report(name: &str, f: &Figures) {
    println!(
        "{name:<34} {:>8.2} {:>8.2} {:>9.0}",
        f.p50, f.p99, f.per_second
    );
}
