// Every device and pinned-host byte goes through an Allocator. It keeps current and peak bytes
// per category and enforces an optional budget, so out-of-memory is testable on any backend.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace dlb {

enum class MemCategory {
  kWeights,
  kGradients,
  kOptimizerState,
  kActivations,  // layer outputs and their gradients
  kWorkspace,    // im2col columns, cuDNN workspaces, scratch
  kData,         // input images and labels
  kComm,         // communication staging
  // Host memory that swapped-out activations wait in (--swap; runtime/nn/swap.h): pinned on a
  // GPU. Not the device's: no budget counts it, nor does the total.
  kHostSwap,
  // Host memory a parameter server's copies sit in (--sync=async; runtime/overlap/param_server.h):
  // the gradients a rank pushes, another rank's reply (the weights it pulls), and on rank 0 the
  // master weights, their momentum and a reply per other rank. Not the device's, as kHostSwap,
  // but ordinary memory, not pinned, on every backend.
  kHostComm,
  kCount
};
constexpr size_t kNumMemCategories = static_cast<size_t>(MemCategory::kCount);
std::string_view mem_category_name(MemCategory c);
// Whether a category's bytes are the host's rather than the device's (kHostSwap, kHostComm).
constexpr bool is_host_memory(MemCategory c) {
  return c == MemCategory::kHostSwap || c == MemCategory::kHostComm;
}

// Where the bytes physically come from: host heap, cudaMalloc, pinned host...
class MemoryResource {
 public:
  virtual ~MemoryResource() = default;
  virtual void* allocate(size_t bytes) = 0;  // nullptr when the device itself is out of memory
  virtual void deallocate(void* p, size_t bytes) = 0;
  virtual std::string_view name() const = 0;
  // Host access to a few bytes of this memory, for the guard zones (memory_guard.h): synchronous
  // copies, made after synchronize() (which waits for all work queued on the device). Plain host
  // memory by default, with nothing to wait for.
  virtual void write(void* dst, const void* src, size_t bytes);
  virtual void read(const void* src, void* dst, size_t bytes);
  virtual void synchronize() {}
  // The most it can hold, in bytes (a device's memory, the host's): 0 where unknown.
  virtual size_t capacity() const { return 0; }
};

class MemoryGuard;

class Allocator;

// An owned allocation. Released to its allocator on destruction.
class Buffer {
 public:
  Buffer(std::shared_ptr<Allocator> owner, void* ptr, size_t bytes, MemCategory category)
      : owner_(std::move(owner)), ptr_(ptr), bytes_(bytes), category_(category) {}
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  MemCategory category() const { return category_; }

 private:
  std::shared_ptr<Allocator> owner_;  // a buffer keeps its allocator alive
  void* ptr_;
  size_t bytes_;
  MemCategory category_;
};

struct MemoryStats {
  std::array<size_t, kNumMemCategories> current{};
  std::array<size_t, kNumMemCategories> peak{};  // peak of each category on its own
  // The device's categories only (not is_host_memory's).
  size_t total_current = 0;
  size_t total_peak = 0;                                  // peak of the sum, not the sum of peaks
  std::array<uint64_t, kNumMemCategories> allocations{};  // successful allocate() calls
};

// Always owned by a shared_ptr (buffers hold one), so create it with std::make_shared.
class Allocator : public std::enable_shared_from_this<Allocator> {
 public:
  // `host`: where is_host_memory categories come from (pinned memory on a GPU), kHostComm apart,
  // which is ordinary host memory then; null: `resource`.
  explicit Allocator(std::unique_ptr<MemoryResource> resource,
                     std::optional<size_t> budget = std::nullopt,
                     std::unique_ptr<MemoryResource> host = nullptr);
  ~Allocator();

  // Throws OutOfMemory (naming `what`, the category and the budget) when the budget or the
  // device would be exceeded. The budget is the device's: host categories are not in it.
  std::shared_ptr<Buffer> allocate(size_t bytes, MemCategory category, std::string_view what);
  // Throws OutOfMemory, before anything is allocated, when `bytes` more of the device's
  // categories, an estimate (a step's memory plan), would not fit in the device's memory (its
  // resource's capacity) beside what is held now: "{what} would take about ...". The budget is not
  // checked here; allocate() enforces it.
  void require_room(size_t bytes, std::string_view what) const;
  // The device's memory (its resource's capacity): 0 where unknown.
  size_t capacity() const { return resource_->capacity(); }

  // --memory-guard: from now on every allocation is surrounded by red zones of a known pattern,
  // which check_guards() (and each release) reads back. Call before the first allocation.
  void enable_guard();
  bool guarded() const { return guard_ != nullptr; }
  // Zeros at bytes [offset, offset + bytes) of `buffer` that must stay zeros: the gaps between
  // parameters' gradients in the flat gradient buffer (collectives sum zeros into zeros).
  void guard_interior(const Buffer& buffer, size_t offset, size_t bytes, std::string_view what);
  // Throws DeviceError naming `after` (the pass that just ran), the buffer and the bytes when
  // any zone of a live allocation was written. Nothing without a guard.
  void check_guards(std::string_view after) const;
  MemoryStats stats() const;
  // Successful allocate() calls so far: a captured step checks that it made none.
  uint64_t allocations() const;
  void reset_peaks();
  std::optional<size_t> budget() const { return budget_; }
  void set_budget(std::optional<size_t> budget) { budget_ = budget; }

 private:
  friend class Buffer;
  void release(void* p, size_t bytes, MemCategory category);

  MemoryResource& resource_for(MemCategory category) const;

  std::unique_ptr<MemoryResource> resource_;
  std::unique_ptr<MemoryResource> host_;  // null: resource_
  std::unique_ptr<MemoryResource> heap_;  // with host_: kHostComm's, ordinary host memory
  std::unique_ptr<MemoryGuard> guard_;
  std::optional<size_t> budget_;
  mutable std::mutex mu_;
  MemoryStats stats_;
  uint64_t allocations_ = 0;
};

// Host memory aligned to 64 bytes.
std::unique_ptr<MemoryResource> make_host_memory_resource();

// "4GiB", "512MiB", "1.5GB", "1000000" -> bytes. Throws InvalidArgument.
size_t parse_bytes(std::string_view text);
std::string format_bytes(size_t bytes);

}  // namespace dlb
