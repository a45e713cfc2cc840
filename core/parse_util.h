// Internal helpers for the text readers in core/ (not part of the public API).
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace cellsched::detail {

inline std::string_view trim(std::string_view s) {
  auto sp = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && sp(s.front())) s.remove_prefix(1);
  while (!s.empty() && sp(s.back())) s.remove_suffix(1);
  return s;
}

inline std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return r;
}

inline bool ends_with_ci(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && lower(s.substr(s.size() - suffix.size())) == lower(suffix);
}

// Whole file into a string; InputError `path: cannot open` when unreadable.
// Read in blocks into one string sized from the file (a stringstream copied
// a 1.2 MB throughput file twice and page-faulted on every growth).
inline std::string read_file(const std::string& path) {
  std::error_code dir_ec;
  if (std::filesystem::is_directory(path, dir_ec)) fail_input(path, 0, "is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_input(path, 0, "cannot open");
  std::string text;
  std::error_code ec;
  if (const auto size = std::filesystem::file_size(path, ec); !ec) text.reserve(size);
  char block[1 << 16];
  while (in.read(block, sizeof block) || in.gcount() > 0) text.append(block, static_cast<size_t>(in.gcount()));
  if (in.bad()) fail_input(path, 0, "read error");
  return text;
}

// Splits text into lines (without '\n' and a trailing '\r').
inline std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    pos = nl + 1;
  }
  return lines;
}

inline std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (true) {
    size_t p = s.find(sep, pos);
    if (p == std::string_view::npos) {
      out.push_back(s.substr(pos));
      return out;
    }
    out.push_back(s.substr(pos, p - pos));
    pos = p + 1;
  }
}

// A finite decimal number filling the whole (trimmed) field.
inline std::optional<double> to_double(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  if (s.front() == '+') s.remove_prefix(1);
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// A decimal integer filling the whole (trimmed) field.
inline std::optional<long long> to_int(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  if (s.front() == '+') s.remove_prefix(1);
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Where each key of a file was first seen: a repeat fails with both lines,
// `file:LINE: duplicate <what> 'KEY' (first on line N)`.
class FirstSeen {
 public:
  explicit FirstSeen(std::string what) : what_(std::move(what)) {}
  void add(const std::string& path, long line, const std::string& key) {
    const auto [it, fresh] = first_.emplace(key, line);
    if (!fresh)
      fail_input(path, line, "duplicate " + what_ + " '" + key + "' (first on line " +
                                 std::to_string(it->second) + ")");
  }

 private:
  std::string what_;
  std::map<std::string, long> first_;
};

// One CSV field (RFC 4180): quoted, with each quote doubled, when it holds
// a comma, a quote, a line break or an edge space; as is otherwise.
inline std::string csv_field(const std::string& s) {
  const bool quote = s.find_first_of(",\"\r\n") != std::string::npos ||
                     (!s.empty() && (s.front() == ' ' || s.back() == ' '));
  if (!quote) return s;
  std::string r = "\"";
  for (char ch : s) {
    if (ch == '"') r += '"';
    r += ch;
  }
  return r + "\"";
}

// Shortest decimal text that reads back to the same double.
inline std::string format_double(double v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;
  return std::string(buf, p);
}

// Deterministic, platform-independent PRNG: xoshiro256** seeded through
// splitmix64 (Blackman & Vigna). Only integer arithmetic, so the stream of
// raw numbers is identical on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t x = seed;
    for (auto& w : s_) w = splitmix64(x);
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double a, double b) { return a + (b - a) * uniform(); }
  // Uniform integer in [0, n), n > 0 (multiply-shift; bias < n / 2^64).
  uint64_t below(uint64_t n) {
    __extension__ typedef unsigned __int128 u128;
    return static_cast<uint64_t>((static_cast<u128>(next()) * n) >> 64);
  }
  // Exponential with the given mean (inverse CDF; 1 - u is in (0, 1]).
  double exponential(double mean) { return -mean * std::log(1.0 - uniform()); }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
};

}  // namespace cellsched::detail
