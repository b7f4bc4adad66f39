//! `vllm-bench`: see the library (`vllm_bench::app`) for everything but the allocator.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    vllm_bench::allocator::purge_freed_pages_at_once();
    std::process::exit(vllm_bench::app::main(std::env::args_os()));
}
