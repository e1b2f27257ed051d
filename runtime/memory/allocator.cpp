#include "runtime/memory/allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "runtime/core/error.h"
#include "runtime/core/parse_number.h"
#include "runtime/memory/host_memory.h"
#include "runtime/memory/memory_guard.h"

namespace dlb {

std::string_view mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::kWeights:
      return "weights";
    case MemCategory::kGradients:
      return "gradients";
    case MemCategory::kOptimizerState:
      return "optimizer_state";
    case MemCategory::kActivations:
      return "activations";
    case MemCategory::kWorkspace:
      return "workspace";
    case MemCategory::kData:
      return "data";
    case MemCategory::kComm:
      return "comm";
    case MemCategory::kHostSwap:
      return "host_swap";
    case MemCategory::kHostComm:
      return "host_comm";
    case MemCategory::kCount:
      break;
  }
  return "?";
}

void MemoryResource::write(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}
void MemoryResource::read(const void* src, void* dst, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

Buffer::~Buffer() {
  if (owner_) owner_->release(ptr_, bytes_, category_);
}

Allocator::Allocator(std::unique_ptr<MemoryResource> resource, std::optional<size_t> budget,
                     std::unique_ptr<MemoryResource> host)
    : resource_(std::move(resource)),
      host_(std::move(host)),
      heap_(host_ ? make_host_memory_resource() : nullptr),
      budget_(budget) {}

MemoryResource& Allocator::resource_for(MemCategory category) const {
  if (!is_host_memory(category) || !host_) return *resource_;
  // Pinned memory is for what copy engines move (swapped activations); a parameter server's
  // copies are the host's and MPI's to read and write, ordinary memory.
  return category == MemCategory::kHostComm ? *heap_ : *host_;
}

Allocator::~Allocator() = default;

void Allocator::enable_guard() {
  std::lock_guard<std::mutex> lock(mu_);
  if (allocations_ > 0) {
    throw InvalidArgument("the memory guard must be enabled before the first allocation");
  }
  guard_ = std::make_unique<MemoryGuard>(*resource_);
}

void Allocator::guard_interior(const Buffer& buffer, size_t offset, size_t bytes,
                               std::string_view what) {
  if (!guard_ || bytes == 0) return;
  if (offset + bytes > buffer.bytes()) {
    throw InvalidArgument(fmt::format("guarded range [{}, {}) is outside a buffer of {} bytes",
                                      offset, offset + bytes, buffer.bytes()));
  }
  guard_->add_interior(static_cast<uint8_t*>(buffer.data()) + offset, bytes, what);
}

void Allocator::check_guards(std::string_view after) const {
  if (!guard_) return;
  const std::vector<std::string> damage = guard_->damage();
  if (damage.empty()) return;
  std::string lines;
  for (const std::string& d : damage) lines += "\n  " + d;
  throw DeviceError(
      fmt::format("memory guard: after {}, memory outside a buffer was written:{}", after, lines));
}

std::shared_ptr<Buffer> Allocator::allocate(size_t bytes, MemCategory category,
                                            std::string_view what) {
  const auto c = static_cast<size_t>(category);
  const bool device = !is_host_memory(category);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (device && budget_ && stats_.total_current + bytes > *budget_) {
      throw OutOfMemory(fmt::format(
          "allocating {} for {} ({}) would exceed the memory budget of {} ({} already in use)",
          format_bytes(bytes), what, mem_category_name(category), format_bytes(*budget_),
          format_bytes(stats_.total_current)));
    }
  }
  // The guard reaches its zones through the device's resource: host memory gets none.
  const bool zoned = guard_ && device;
  const size_t zone = zoned ? MemoryGuard::kZoneBytes : 0;
  const size_t asked = bytes == 0 ? 1 : bytes;
  if (asked > SIZE_MAX - 2 * zone) {
    throw OutOfMemory(fmt::format("{} bytes for {} is more than any memory", bytes, what));
  }
  MemoryResource& resource = resource_for(category);
  void* base = resource.allocate(asked + 2 * zone);
  void* p = base ? static_cast<uint8_t*>(base) + zone : nullptr;
  if (!p) {
    throw OutOfMemory(fmt::format("{} could not allocate {} for {} ({})", resource.name(),
                                  format_bytes(bytes), what, mem_category_name(category)));
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.current[c] += bytes;
  stats_.peak[c] = std::max(stats_.peak[c], stats_.current[c]);
  if (device) {
    stats_.total_current += bytes;
    stats_.total_peak = std::max(stats_.total_peak, stats_.total_current);
  }
  ++allocations_;
  ++stats_.allocations[c];
  if (zoned) guard_->arm(p, asked, category, what);
  return std::make_shared<Buffer>(shared_from_this(), p, bytes, category);
}

uint64_t Allocator::allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocations_;
}

void Allocator::release(void* p, size_t bytes, MemCategory category) {
  MemoryResource& resource = resource_for(category);
  if (guard_ && !is_host_memory(category)) {
    guard_->disarm(p);
    const size_t zone = MemoryGuard::kZoneBytes;
    resource.deallocate(static_cast<uint8_t*>(p) - zone, (bytes == 0 ? 1 : bytes) + 2 * zone);
  } else {
    resource.deallocate(p, bytes == 0 ? 1 : bytes);
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.current[static_cast<size_t>(category)] -= bytes;
  if (!is_host_memory(category)) stats_.total_current -= bytes;
}

MemoryStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Allocator::require_room(size_t bytes, std::string_view what) const {
  const size_t capacity = this->capacity();
  size_t held = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    held = stats_.total_current;
  }
  const std::string where = held == 0 ? fmt::format("the {} here", resource_->name())
                                      : fmt::format("the {} here less the {} in use",
                                                    resource_->name(), format_bytes(held));
  // Unknown (0) stays unknown; a device already full has room for nothing.
  const size_t room = capacity == 0 ? 0 : std::max<size_t>(1, capacity - std::min(capacity, held));
  require_memory(static_cast<double>(bytes), room, what, where);
}

void Allocator::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak = stats_.current;
  stats_.total_peak = stats_.total_current;
}

namespace {
class HostMemoryResource final : public MemoryResource {
 public:
  void* allocate(size_t bytes) override { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }
  void deallocate(void* p, size_t) override { std::free(p); }
  std::string_view name() const override { return "host memory"; }
  size_t capacity() const override { return host_memory_bytes(); }
};
}  // namespace

std::unique_ptr<MemoryResource> make_host_memory_resource() {
  return std::make_unique<HostMemoryResource>();
}

size_t parse_bytes(std::string_view text) {
  const std::string s(text);
  const auto number = parse_finite_prefix(text);
  if (!number) {
    throw InvalidArgument(fmt::format("'{}' is not a size (expected e.g. 4GiB, 512MiB, 1e9)", s));
  }
  const auto [value, used] = *number;
  const std::string unit = s.substr(used);
  double scale = 0;
  for (const auto& [name, factor] : {std::pair{"", 1.0},
                                     {"B", 1.0},
                                     {"KiB", 1024.0},
                                     {"MiB", 1024.0 * 1024},
                                     {"GiB", 1024.0 * 1024 * 1024},
                                     {"KB", 1e3},
                                     {"MB", 1e6},
                                     {"GB", 1e9}}) {
    if (unit == name) scale = factor;
  }
  if (scale == 0 || !(value > 0)) {
    throw InvalidArgument(
        fmt::format("'{}' is not a positive size (units: B, KiB, MiB, GiB, KB, MB, GB)", s));
  }
  // Whole bytes: a size of less than one is no size, and any other rounds to the nearest.
  if (value * scale < 1) throw InvalidArgument(fmt::format("'{}' is less than one byte", s));
  const double bytes = std::round(value * scale);
  // 2^64 bytes and more do not fit a size_t (and no machine has them).
  if (bytes >= 18446744073709551616.0) {
    throw InvalidArgument(fmt::format("'{}' is larger than any memory (2^64 bytes or more)", s));
  }
  return static_cast<size_t>(bytes);
}

std::string format_bytes(size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.2f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

}  // namespace dlb
