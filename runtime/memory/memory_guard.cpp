#include "runtime/memory/memory_guard.h"

#include <fmt/format.h>

#include <cstring>

namespace dlb {
namespace {

// 0xFFA5 in every 16-bit half: a NaN as f16 and as bf16, and 0xFFA5FFA5 a NaN as f32.
constexpr uint8_t kPattern[4] = {0xA5, 0xFF, 0xA5, 0xFF};

std::vector<uint8_t> pattern(size_t bytes) {
  std::vector<uint8_t> p(bytes);
  for (size_t i = 0; i < bytes; ++i) p[i] = kPattern[i % 4];
  return p;
}

}  // namespace

void MemoryGuard::arm(void* user, size_t bytes, MemCategory category, std::string_view what) {
  const std::vector<uint8_t> p = pattern(kZoneBytes);
  auto* u = static_cast<uint8_t*>(user);
  resource_.synchronize();
  resource_.write(u - kZoneBytes, p.data(), kZoneBytes);
  resource_.write(u + bytes, p.data(), kZoneBytes);
  std::lock_guard<std::mutex> lock(mu_);
  blocks_[reinterpret_cast<uintptr_t>(user)] = {bytes, category, std::string(what)};
}

int64_t MemoryGuard::first_changed(const void* at, size_t bytes, bool zeros) const {
  std::vector<uint8_t> seen(bytes);
  resource_.read(at, seen.data(), bytes);
  for (size_t i = 0; i < bytes; ++i) {
    if (seen[i] != (zeros ? 0 : kPattern[i % 4])) return static_cast<int64_t>(i);
  }
  return -1;
}

// The damage to one block's zones, or "" when there is none.
std::string MemoryGuard::describe(uintptr_t user, const Block& b) const {
  const auto* u = reinterpret_cast<const uint8_t*>(user);
  const std::string name =
      fmt::format("'{}' ({}, {} bytes)", b.what, mem_category_name(b.category), b.bytes);
  const int64_t after = first_changed(u + b.bytes, kZoneBytes, false);
  if (after >= 0) {
    return fmt::format("the {} bytes after {} were written, the first at byte {} past its end",
                       kZoneBytes, name, after);
  }
  const int64_t before = first_changed(u - kZoneBytes, kZoneBytes, false);
  if (before >= 0) {
    return fmt::format("the {} bytes before {} were written, the first at byte {} before its start",
                       kZoneBytes, name, kZoneBytes - static_cast<size_t>(before));
  }
  return "";
}

void MemoryGuard::disarm(void* user) noexcept {
  const auto key = reinterpret_cast<uintptr_t>(user);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(key);
  if (it == blocks_.end()) return;
  // Called from a Buffer's destructor, so it must not throw: a device that cannot be read (a
  // sticky CUDA error, the very thing the guard may be about to report) is reported instead.
  try {
    resource_.synchronize();
    const std::string d = describe(key, it->second);
    if (!d.empty()) freed_damage_.push_back(d + " (found when it was freed)");
  } catch (const std::exception& e) {
    freed_damage_.push_back(fmt::format("the zones of '{}' could not be read when it was freed: {}",
                                        it->second.what, e.what()));
  }
  interior_.erase(interior_.lower_bound(key), interior_.lower_bound(key + it->second.bytes));
  blocks_.erase(it);
}

void MemoryGuard::add_interior(void* at, size_t bytes, std::string_view what) {
  const std::vector<uint8_t> zeros(bytes, 0);
  resource_.synchronize();
  resource_.write(at, zeros.data(), bytes);
  std::lock_guard<std::mutex> lock(mu_);
  interior_[reinterpret_cast<uintptr_t>(at)] = {bytes, std::string(what)};
}

std::vector<std::string> MemoryGuard::damage() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out = freed_damage_;
  resource_.synchronize();  // once, then every zone is read
  for (const auto& [user, block] : blocks_) {
    const std::string d = describe(user, block);
    if (!d.empty()) out.push_back(d);
  }
  for (const auto& [at, zone] : interior_) {
    const int64_t changed = first_changed(reinterpret_cast<const void*>(at), zone.bytes, true);
    if (changed >= 0) {
      out.push_back(fmt::format("the {}, which must stay zero, was written at its byte {}",
                                zone.what, changed));
    }
  }
  return out;
}

}  // namespace dlb
