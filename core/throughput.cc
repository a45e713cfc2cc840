#include "core/throughput.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/parse_util.h"

namespace cellsched {

namespace {

using detail::trim;

// 1-based line of a byte offset in text.
long line_at(const std::string& text, size_t byte) {
  byte = std::min(byte, text.size());
  return 1 + static_cast<long>(std::count(text.begin(), text.begin() + byte, '\n'));
}

// Best-effort line of `"inner"` inside the object of `"outer"` (for errors
// found after parsing, where nlohmann keeps no positions). 0 when not found.
long line_of_key(const std::string& text, const std::string& outer, const std::string& inner) {
  const std::string o = nlohmann::json(outer).dump();
  size_t pos = text.find(o);
  if (pos == std::string::npos) return 0;
  if (!inner.empty()) {
    const size_t p = text.find(nlohmann::json(inner).dump(), pos + o.size());
    if (p == std::string::npos) return line_at(text, pos);
    pos = p;
  }
  return line_at(text, pos);
}

// nlohmann keeps the last of two equal keys of an object without a word, so
// the (already parsed, hence well-formed) text is walked once more: every
// object's keys with their lines, a repeat failing with both lines.
void check_duplicate_keys(const std::string& path, const std::string& text) {
  struct Object {
    bool is_object = false, key_next = false;
    detail::FirstSeen keys{"key"};
  };
  std::vector<Object> open;
  long line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
    } else if (c == '{' || c == '[') {
      open.push_back({c == '{', c == '{', detail::FirstSeen("key")});
    } else if ((c == '}' || c == ']') && !open.empty()) {
      open.pop_back();
    } else if (c == ',' && !open.empty()) {
      open.back().key_next = open.back().is_object;
    } else if (c == '"') {  // a string holds no raw newline in valid JSON
      const size_t begin = i;
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
      if (open.empty() || !open.back().key_next) continue;
      open.back().key_next = false;
      const std::string raw = text.substr(begin, i + 1 - begin);
      std::string key;
      try {
        key = raw.find('\\') == std::string::npos ? raw.substr(1, raw.size() - 2)
                                                  : nlohmann::json::parse(raw).get<std::string>();
      } catch (const nlohmann::json::exception&) {  // not reached on text the parser took; never escapes
        fail_input(path, line, "invalid JSON: bad string " + raw);
      }
      open.back().keys.add(path, line, key);
    }
  }
}

// Undoes Python's repr of a (str, int) tuple: "('ResNet-50 (batch size 64)', 1)".
// Accepts either quote character and backslash escapes inside the string.
bool parse_tuple_key(std::string_view key, std::string& job_type, int& scale_factor) {
  std::string_view s = trim(key);
  if (s.size() < 2 || s.front() != '(' || s.back() != ')') return false;
  s = trim(s.substr(1, s.size() - 2));
  if (s.empty() || (s.front() != '\'' && s.front() != '"')) return false;
  const char q = s.front();
  std::string name;
  size_t i = 1;
  bool closed = false;
  for (; i < s.size(); ++i) {
    const char ch = s[i];
    if (ch == '\\' && i + 1 < s.size()) {
      const char e = s[++i];
      name.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e);
    } else if (ch == q) {
      closed = true;
      ++i;
      break;
    } else {
      name.push_back(ch);
    }
  }
  if (!closed || name.empty()) return false;
  std::string_view rest = trim(s.substr(i));
  if (rest.empty() || rest.front() != ',') return false;
  rest = trim(rest.substr(1));
  const auto sf = detail::to_int(rest);
  if (!sf || *sf <= 0 || *sf > 1000000) return false;
  job_type = std::move(name);
  scale_factor = static_cast<int>(*sf);
  return true;
}

}  // namespace

void ThroughputTable::set(const std::string& gpu_type, const std::string& job_type,
                          int scale_factor, double steps_per_s) {
  table_[{gpu_type, job_type, scale_factor}] = steps_per_s;
  auto& row = index_[gpu_type].jobs[job_type];
  link(gpu_type);
  const auto at = std::lower_bound(row.begin(), row.end(), std::make_pair(scale_factor, -1e300));
  if (at != row.end() && at->first == scale_factor) at->second = steps_per_s;
  else row.insert(at, {scale_factor, steps_per_s});
}

ThroughputTable::ThroughputTable(const ThroughputTable& other)
    : source(other.source), table_(other.table_), index_(other.index_) {
  for (auto& [name, t] : index_) t.unconsolidated = nullptr;
  for (const auto& [name, t] : other.index_) link(name);
}

ThroughputTable& ThroughputTable::operator=(const ThroughputTable& other) {
  if (this != &other) *this = ThroughputTable(other);
  return *this;
}

// Links a type and its "_unconsolidated" sibling, whichever came first
// (unordered_map nodes stay put, so the pointer stays valid).
void ThroughputTable::link(const std::string& gpu_type) {
  static const std::string kUnconsolidated = "_unconsolidated";
  if (gpu_type.size() > kUnconsolidated.size() &&
      gpu_type.compare(gpu_type.size() - kUnconsolidated.size(), kUnconsolidated.size(), kUnconsolidated) == 0)
    index_[gpu_type.substr(0, gpu_type.size() - kUnconsolidated.size())].unconsolidated = &index_.at(gpu_type);
  else if (const auto u = index_.find(gpu_type + kUnconsolidated); u != index_.end())
    index_[gpu_type].unconsolidated = &u->second;
}

std::optional<double> ThroughputTable::get(const std::string& gpu_type,
                                           const std::string& job_type,
                                           int scale_factor) const {
  const auto g = index_.find(gpu_type);
  if (g == index_.end()) return std::nullopt;
  const auto j = g->second.jobs.find(job_type);
  if (j == g->second.jobs.end()) return std::nullopt;
  for (const auto& [sf, v] : j->second)
    if (sf == scale_factor) return v;
  return std::nullopt;
}

std::vector<std::string> ThroughputTable::gpu_types() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : table_)
    if (out.empty() || out.back() != std::get<0>(k)) out.push_back(std::get<0>(k));
  return out;  // map order: already sorted and grouped
}

std::vector<std::string> ThroughputTable::job_types() const {
  std::set<std::string> s;
  for (const auto& [k, v] : table_) s.insert(std::get<1>(k));
  return {s.begin(), s.end()};
}

std::vector<int> ThroughputTable::scale_factors(const std::string& gpu_type,
                                                const std::string& job_type) const {
  std::vector<int> out;
  const auto g = index_.find(gpu_type);
  if (g == index_.end()) return out;
  const auto j = g->second.jobs.find(job_type);
  if (j == g->second.jobs.end()) return out;
  for (const auto& [sf, v] : j->second) out.push_back(sf);
  return out;
}

ThroughputTable load_gavel_throughputs(const std::string& path) {
  const std::string text = detail::read_file(path);
  // nlohmann ends the input at a NUL byte and accepts whatever follows unread,
  // which the duplicate-key walk then read as JSON (fuzz_throughputs found
  // an uncaught parse_error there). JSON has no NUL byte anywhere.
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    fail_input(path, line_at(text, nul), "invalid JSON: a NUL byte");
  // Only each entry's isolated ("null") figure is used: the co-location
  // figures, most of Gavel's file, are still parsed (a malformed one is an
  // error) but not built into the document, which halves the load.
  const auto keep = [](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    return depth != 3 || event != nlohmann::json::parse_event_t::key || parsed == "null";
  };
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text, keep);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based position of the offending character.
    const size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    std::string what = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix.
    if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    // ... and its own "parse error at line L, column C: " (the line is ours now).
    if (what.rfind("parse error at line ", 0) == 0)
      if (auto p = what.find(": "); p != std::string::npos) what = what.substr(p + 2);
    fail_input(path, line_at(text, byte), "invalid JSON: " + what);
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
    fail_input(path, 0, std::string("invalid JSON: ") + e.what());
  }
  if (!doc.is_object())
    fail_input(path, 1, "expected an object {worker_type: {\"('<JobType>', <sf>)\": {...}}}");
  check_duplicate_keys(path, text);

  ThroughputTable t;
  t.source = path;
  for (const auto& [worker, jobs] : doc.items()) {
    if (trim(worker).empty()) fail_input(path, line_of_key(text, worker, ""), "empty worker type");
    if (!jobs.is_object())
      fail_input(path, line_of_key(text, worker, ""),
                 "worker type '" + worker + "' must map to an object of job types");
    // Two spellings of one (job type, scale factor): "('A', 1)" and "(\"A\",1)".
    std::map<std::pair<std::string, int>, std::string> spelled;
    for (const auto& [key, entry] : jobs.items()) {
      std::string job_type;
      int sf = 0;
      if (!parse_tuple_key(key, job_type, sf))
        fail_input(path, line_of_key(text, worker, key),
                   "bad job key '" + key + "' (expected \"('<JobType>', <scale factor>)\")");
      if (const auto [it, fresh] = spelled.emplace(std::make_pair(job_type, sf), key); !fresh) {
        auto a = std::make_pair(line_of_key(text, worker, it->second), it->second);
        auto b = std::make_pair(line_of_key(text, worker, key), key);
        if (b < a) std::swap(a, b);
        fail_input(path, b.first, "job key '" + b.second + "' names the same job type and scale factor as '" +
                                      a.second + "' (first on line " + std::to_string(a.first) + ")");
      }
      if (!entry.is_object())
        fail_input(path, line_of_key(text, worker, key),
                   "entry of '" + key + "' must be an object with a \"null\" figure");
      auto it = entry.find("null");
      if (it == entry.end())
        fail_input(path, line_of_key(text, worker, key),
                   "entry of '" + key + "' has no isolated (\"null\") throughput");
      if (!it->is_number() || it->get<double>() < 0)
        fail_input(path, line_of_key(text, worker, key),
                   "isolated throughput of '" + key + "' must be a non-negative number");
      t.set(worker, job_type, sf, it->get<double>());
    }
  }
  if (t.size() == 0) fail_input(path, 0, "no throughput entries");
  return t;
}

std::pair<std::string, int> split_job_type(const std::string& job_type) {
  static const std::string marker = " (batch size ";
  const size_t p = job_type.rfind(marker);
  if (p != std::string::npos && !job_type.empty() && job_type.back() == ')') {
    const std::string_view num =
        std::string_view(job_type).substr(p + marker.size(),
                                          job_type.size() - 1 - (p + marker.size()));
    const auto b = detail::to_int(num);
    if (b && *b > 0 && *b <= 1 << 30)
      return {std::string(trim(std::string_view(job_type).substr(0, p))), static_cast<int>(*b)};
  }
  return {job_type, 0};
}

}  // namespace cellsched
