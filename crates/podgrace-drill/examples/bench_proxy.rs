//! Runs the drill's service proxy in front of fixed upstreams, for `bench/proxy.sh`.
//!
//! `bench_proxy LISTEN MODE UPSTREAM...` (MODE: http1, http1-per-request, h2c, tcp); runs until
//! killed. `WORKERS=N` (default: the number of CPUs) serves the connections on N single-threaded
//! runtimes, one thread each, in turn (`ProxyConfig::workers`), the shape of nginx's
//! `worker_processes auto`; `WORKERS=0` serves them on one multi-thread runtime instead.

use podgrace_drill::endpoints::{Endpoint, EndpointsHandle};
use podgrace_drill::proxy::{Balancing, Mode, Proxy, ProxyConfig};
use std::net::SocketAddr;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || {
        eprintln!("usage: bench_proxy LISTEN MODE UPSTREAM...");
        ExitCode::from(2)
    };
    if args.len() < 3 {
        return usage();
    }
    let Ok(listen) = args[0].parse::<SocketAddr>() else {
        return usage();
    };
    let (mode, balancing) = match args[1].as_str() {
        "http1" => (Mode::Http1, Balancing::PerConnection),
        "http1-per-request" => (Mode::Http1, Balancing::PerRequest),
        "h2c" => (Mode::H2c, Balancing::PerConnection),
        "tcp" => (Mode::Tcp, Balancing::PerConnection),
        _ => return usage(),
    };
    let mut set = Vec::new();
    for (i, a) in args[2..].iter().enumerate() {
        let Ok(addr) = a.parse::<SocketAddr>() else {
            return usage();
        };
        set.push(Endpoint::ready(format!("pod-{i}"), addr));
    }
    let workers: usize = std::env::var("WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // WORKERS single-threaded runtimes, each driven by its own thread.
    let mut handles = Vec::new();
    for _ in 0..workers {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return ExitCode::from(1);
        };
        handles.push(rt.handle().clone());
        std::thread::spawn(move || rt.block_on(std::future::pending::<()>()));
    }
    let rt = if workers == 0 {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let Ok(rt) = rt else {
        return ExitCode::from(1);
    };
    rt.block_on(async move {
        let h = EndpointsHandle::new(std::time::Duration::ZERO);
        h.publish_now(set);
        let mut config = ProxyConfig::new(mode);
        config.balancing = balancing;
        config.workers = handles;
        match Proxy::start(listen, config, h.view()).await {
            Ok(p) => {
                eprintln!("bench_proxy: listening on {}", p.local_addr());
                std::future::pending::<()>().await;
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("bench_proxy: {e}");
                ExitCode::from(1)
            }
        }
    })
}
