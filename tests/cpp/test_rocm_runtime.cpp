// The ROCm runtime on a real GPU: the caching allocator under concurrent use
// on two streams, transfers (and the host waits they cost), streams, events,
// per-thread default streams, and a HIP graph captured with a private memory
// pool. Skips (with the reason) when no GPU is usable. scripts/gpu_check.sh
// also runs this binary under compute-sanitizer's memcheck and racecheck.

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "pyflame/backend/rocm/device.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/kernels.h"
#include "pyflame/backend/rocm/memory.h"
#include "pyflame/backend/rocm/stream.h"
#include "pyflame/device.h"

namespace rocm = pyflame::backend::rocm;
using pyflame::ir::OpType;

namespace {
bool gpu_or_skip() {
  if (rocm::is_available()) return true;
  MESSAGE("skipped: no usable GPU: " << rocm::unavailable_reason());
  return false;
}
}  // namespace

TEST_CASE("device info describes a real GPU") {
  if (!gpu_or_skip()) return;
  rocm::DeviceInfo info = rocm::get_device_info(0);
  CHECK(!info.name.empty());
  CHECK((info.architecture.rfind("sm_", 0) == 0 || info.architecture.rfind("gfx", 0) == 0));
  CHECK((info.warp_size == 32 || info.warp_size == 64));
  CHECK(info.total_memory > info.free_memory);
  CHECK(info.compute_units > 0);
  CHECK_THROWS_AS(rocm::get_device_info(rocm::get_device_count()), pyflame::DeviceError);
}

TEST_CASE("host -> device -> host round trips through pinned staging and direct copies") {
  if (!gpu_or_skip()) return;
  rocm::ROCmMemoryManager& mm = rocm::get_memory_manager(0);
  // Below and past the staging chunk, and past two staging windows (the host waits for the first).
  for (size_t bytes : {size_t{1000}, size_t{3} << 20, (size_t{17} << 20) + 5, (size_t{100} << 20) + 3}) {
    std::vector<unsigned char> src(bytes), back(bytes, 0xAB);
    std::mt19937 rng(static_cast<unsigned>(bytes));
    for (auto& b : src) b = static_cast<unsigned char>(rng());
    void* d = mm.allocate(bytes);
    void* d2 = mm.allocate(bytes);
    mm.memset(d2, 0x5A, bytes);  // poison the destination first
    mm.copy_host_to_device(d, src.data(), bytes);
    mm.copy_device_to_device(d2, d, bytes);
    mm.copy_device_to_host(back.data(), d2, bytes);
    CHECK(std::memcmp(src.data(), back.data(), bytes) == 0);
    mm.deallocate(d);
    mm.deallocate(d2);
  }
}

TEST_CASE("the caching allocator serves repeat requests from its cache") {
  if (!gpu_or_skip()) return;
  rocm::ROCmMemoryManager& mm = rocm::get_memory_manager(0);
  mm.deallocate(mm.allocate(1 << 20));
  mm.reset_stats();
  const size_t in_use = mm.get_stats().total_allocated;  // held by others (e.g. a BLAS workspace)
  for (int i = 0; i < 100; ++i) mm.deallocate(mm.allocate(1 << 20));
  rocm::MemoryStats s = mm.get_stats();
  CHECK(s.cache_hits == 100);
  CHECK(s.cache_misses == 0);
  CHECK(s.total_allocated == in_use);
}

TEST_CASE("out of memory raises ROCmMemoryError and leaves the manager usable") {
  if (!gpu_or_skip()) return;
  rocm::ROCmMemoryManager& mm = rocm::get_memory_manager(0);
  size_t free = 0, total = 0;
  mm.get_memory_info(&free, &total);
  CHECK_THROWS_AS(mm.allocate(total * 4), pyflame::ROCmMemoryError);
  void* p = mm.allocate(4096);
  CHECK(p != nullptr);
  mm.deallocate(p);
}

TEST_CASE("threads allocate and free on two streams; everything returns") {
  if (!gpu_or_skip()) return;
  rocm::ROCmMemoryManager& mm = rocm::get_memory_manager(0);
  rocm::Stream s1(0), s2(0);
  hipStream_t streams[2] = {s1.handle(), s2.handle()};
  size_t before = mm.get_stats().total_allocated;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<void*, hipStream_t>> live;
      for (int i = 0; i < 2000; ++i) {
        if (live.size() < 16 && (rng() % 3 != 0 || live.empty())) {
          size_t bytes = (rng() % 4 == 0) ? (size_t{1} << 20) + rng() % (size_t{8} << 20) : 1 + rng() % 65536;
          hipStream_t st = streams[rng() % 2];
          void* p = mm.allocate_async(bytes, st);
          // Real work on the block, so reuse before it finishes would be a race.
          mm.memset_async(p, t, bytes, st);
          live.emplace_back(p, st);
        } else {
          size_t k = rng() % live.size();
          // Half the frees happen after a use on the other stream.
          hipStream_t st = (rng() % 2) ? live[k].second : (live[k].second == streams[0] ? streams[1] : streams[0]);
          try {
            mm.deallocate_async(live[k].first, st);
          } catch (...) {
            failures++;
          }
          live.erase(live.begin() + static_cast<long>(k));
        }
      }
      for (auto& [p, st] : live) mm.deallocate_async(p, st);
    });
  }
  for (auto& th : threads) th.join();
  s1.synchronize();
  s2.synchronize();
  CHECK(failures == 0);
  CHECK(mm.get_stats().total_allocated == before);
  mm.clear_pool();
  if (before == 0) CHECK(mm.get_stats().reserved_bytes == 0);
}

TEST_CASE("streams order work and events time it") {
  if (!gpu_or_skip()) return;
  rocm::ROCmMemoryManager& mm = rocm::get_memory_manager(0);
  rocm::Stream stream(0, -1);
  const size_t bytes = size_t{64} << 20;
  void* a = mm.allocate_async(bytes, stream.handle());
  void* b = mm.allocate_async(bytes, stream.handle());
  rocm::Event start(true), end(true);
  start.record(stream.handle());
  mm.memset_async(a, 1, bytes, stream.handle());
  mm.copy_device_to_device_async(b, a, bytes, stream.handle());
  end.record(stream.handle());
  end.synchronize();
  CHECK(end.query());
  CHECK(stream.query());
  CHECK(start.elapsed_time(end) > 0.0f);
  std::vector<unsigned char> host(16);
  mm.copy_device_to_host(host.data(), static_cast<char*>(b) + bytes - 16, 16);
  for (unsigned char c : host) CHECK(c == 1);
  mm.deallocate_async(a, stream.handle());
  mm.deallocate_async(b, stream.handle());
  {
    rocm::StreamGuard guard(stream);
    CHECK(rocm::current_stream(0) == stream.handle());
  }
  CHECK(rocm::current_stream(0) == rocm::default_stream(0));
}

TEST_CASE("each thread's default stream is a non-blocking stream of its own") {
  if (!gpu_or_skip()) return;
  hipStream_t mine = rocm::current_stream(0);
  CHECK(mine != nullptr);  // never the legacy null stream
  CHECK(mine == rocm::default_stream(0));
  unsigned flags = 0;
  HIP_CHECK(hipStreamGetFlags(mine, &flags));
  CHECK((flags & hipStreamNonBlocking) != 0);
  rocm::set_current_stream(0, nullptr);  // nullptr: back to the default
  CHECK(rocm::current_stream(0) == mine);
  hipStream_t first = nullptr, second = nullptr;
  std::thread([&] { first = rocm::current_stream(0); }).join();
  CHECK(first != nullptr);
  CHECK(first != mine);
  // The first thread handed its stream back when it exited; the next one takes it.
  std::thread([&] { second = rocm::current_stream(0); }).join();
  CHECK(second == first);
}

TEST_CASE("host->device copies do not wait for the device; reads and synchronize do, once each") {
  if (!gpu_or_skip()) return;
  rocm::ROCmMemoryManager& mm = rocm::get_memory_manager(0);
  hipStream_t stream = rocm::current_stream(0);
  const size_t busy_bytes = size_t{1} << 30;
  void* busy = mm.allocate(busy_bytes);
  const size_t n = 1000;
  std::vector<float> host(n), back(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i) * 0.5f;
  void* d = mm.allocate(n * sizeof(float));
  mm.copy_host_to_device(d, host.data(), n * sizeof(float));  // warm the pinned pool
  mm.copy_device_to_host(back.data(), d, n * sizeof(float));

  int64_t before = pyflame::synchronization_count();
  for (int i = 0; i < 40; ++i) mm.memset_async(busy, i, busy_bytes, stream);  // over 10 ms of work
  mm.copy_host_to_device(d, host.data(), n * sizeof(float));
  rocm::Event copied;
  copied.record(stream);
  CHECK_FALSE(copied.query());  // returned while the work before it still runs
  std::fill(host.begin(), host.end(), -1.0f);  // the copy has its own staged bytes
  CHECK(pyflame::synchronization_count() == before);
  mm.copy_device_to_host(back.data(), d, n * sizeof(float));
  CHECK(pyflame::synchronization_count() == before + 1);
  for (size_t i = 0; i < n; ++i) REQUIRE(back[i] == static_cast<float>(i) * 0.5f);

  // A large read waits once however many chunks it has; synchronize() counts once.
  std::vector<unsigned char> big(size_t{20} << 20);
  mm.copy_device_to_host(big.data(), busy, big.size());
  CHECK(big[0] == 39);
  CHECK(pyflame::synchronization_count() == before + 2);
  rocm::synchronize();
  CHECK(pyflame::synchronization_count() == before + 3);
  mm.deallocate(d);
  mm.deallocate(busy);
}

TEST_CASE("kernels and an allocation captured into a graph replay on the pool's memory") {
  if (!gpu_or_skip()) return;
  rocm::ROCmMemoryManager& mm = rocm::get_memory_manager(0);
  hipStream_t stream = rocm::current_stream(0);  // this thread's default stream: capturable
  const int64_t n = (int64_t{1} << 20) + 3;
  const size_t bytes = size_t(n) * sizeof(float);
  auto* x = static_cast<float*>(mm.allocate(bytes));
  auto* out = static_cast<float*>(mm.allocate(bytes));
  // out = clamp(exp(x), 0.5, 4) + x, through a temporary the graph allocates.
  auto run = [&] {
    auto* tmp = static_cast<float*>(mm.allocate(bytes));
    rocm::launch_elementwise_unary(OpType::exp, tmp, x, n, stream);
    rocm::launch_clamp(tmp, tmp, 0.5f, 4.0f, n, stream);
    rocm::launch_elementwise_binary(OpType::add, out, tmp, x, n, stream);
    mm.deallocate(tmp);
    return tmp;
  };
  auto fill_x = [&](unsigned seed, std::vector<float>& want) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-3.0f, 3.0f);
    std::vector<float> host(n);
    for (auto& v : host) v = u(rng);
    for (int64_t i = 0; i < n; ++i) want[i] = std::min(std::max(std::exp(host[i]), 0.5f), 4.0f) + host[i];
    mm.copy_host_to_device(x, host.data(), bytes);
  };
  auto check_out = [&](const std::vector<float>& want) {
    std::vector<float> got(n);
    mm.copy_device_to_host(got.data(), out, bytes);
    for (int64_t i = 0; i < n; ++i) {
      INFO("element " << i);
      REQUIRE(std::abs(got[i] - want[i]) <= 1e-5f * (1 + std::abs(want[i])));
    }
  };
  std::vector<float> want(n);
  fill_x(1, want);
  run();  // once eagerly: the kernels are loaded before the capture
  check_out(want);

  mm.memset(out, 0, bytes);
  rocm::MemoryStats before = mm.get_stats();
  rocm::PoolId pool = mm.begin_pool(stream);
  HIP_CHECK(hipStreamBeginCapture(stream, hipStreamCaptureModeThreadLocal));
  float* captured_tmp = run();
  CHECK_THROWS_AS(mm.copy_host_to_device(x, want.data(), 4), pyflame::NotSupportedError);
  hipGraph_t graph = nullptr;
  HIP_CHECK(hipStreamEndCapture(stream, &graph));
  mm.end_pool(stream);

  rocm::MemoryStats during = mm.get_stats();
  CHECK(during.pools == before.pools + 1);
  CHECK(during.pool_reserved_bytes >= before.pool_reserved_bytes + bytes);
  // The graph's temporary stays the graph's: nobody else is handed its memory.
  auto* other = static_cast<float*>(mm.allocate(bytes));
  CHECK(other != captured_tmp);
  std::vector<float> zeros(n);
  mm.copy_device_to_host(zeros.data(), out, bytes);
  CHECK(std::all_of(zeros.begin(), zeros.end(), [](float v) { return v == 0.0f; }));  // captured, not run

  hipGraphExec_t exec = nullptr;
  HIP_CHECK(hipGraphInstantiateWithFlags(&exec, graph, 0));
  for (unsigned seed : {2u, 3u}) {  // replays read x and write out in place
    fill_x(seed, want);
    HIP_CHECK(hipGraphLaunch(exec, stream));
    check_out(want);
  }
  HIP_CHECK(hipGraphExecDestroy(exec));
  HIP_CHECK(hipGraphDestroy(graph));
  mm.clear_pool();  // leaves the pool's memory alone
  size_t kept = mm.get_stats().reserved_bytes;
  mm.release_pool(pool, stream);
  rocm::MemoryStats after = mm.get_stats();
  CHECK(after.pools == before.pools);
  CHECK(after.pool_reserved_bytes == before.pool_reserved_bytes);
  mm.clear_pool();  // now the general cache's, so given back
  CHECK(mm.get_stats().reserved_bytes == kept - (during.pool_reserved_bytes - before.pool_reserved_bytes));
  for (float* p : {x, out, other}) mm.deallocate(p);
}

// Last in the file, so last to run: hands the caches back, so that
// compute-sanitizer's leak check sees only real leaks.
TEST_CASE("release cached device and pinned memory") {
  if (!gpu_or_skip()) return;
  rocm::get_memory_manager(0).clear_pool();
  rocm::get_pinned_pool().clear();
  CHECK(rocm::get_memory_manager(0).get_stats().reserved_bytes == 0);
}
