// The only runner file that includes LibTorch.
#include <torch/serialize.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "runner/checkpoint.h"

namespace cellsched::runner {
namespace {

std::vector<char> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(path + ": cannot read checkpoint");
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

c10::Dict<c10::IValue, c10::IValue> load_dict(const std::string& path) {
  c10::IValue v;
  try {
    v = torch::pickle_load(read_all(path));
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    if (what.find("Expected GenericDict but got None") != std::string::npos)
      throw std::runtime_error(path + ": an OrderedDict, which LibTorch 1.13 cannot read; save a plain "
                               "dict: torch.save(dict(model.state_dict()), path)");
    throw std::runtime_error(path + ": not a PyTorch checkpoint: " + what.substr(0, what.find('\n')));
  }
  if (!v.isGenericDict()) throw std::runtime_error(path + ": not a state dict (a dict of tensors)");
  return v.toGenericDict();
}

class TorchAverager final : public CheckpointAverager {
 public:
  std::string name() const override { return "libtorch"; }

  void average(const std::vector<std::string>& inputs, const std::vector<double>& weights,
               const std::string& output) const override {
    if (inputs.empty() || inputs.size() != weights.size())
      throw std::runtime_error("average: inputs and weights differ in number");
    double total = 0;
    size_t best = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
      if (weights[i] < 0) throw std::runtime_error("average: negative weight");
      total += weights[i];
      if (weights[i] > weights[best]) best = i;
    }
    if (!(total > 0)) throw std::runtime_error("average: the weights sum to zero");
    torch::NoGradGuard no_grad;
    std::vector<c10::Dict<c10::IValue, c10::IValue>> dicts;
    for (const std::string& in : inputs) dicts.push_back(load_dict(in));
    c10::Dict<std::string, at::Tensor> out;
    for (const auto& entry : dicts[best]) {
      if (!entry.key().isString()) throw std::runtime_error(inputs[best] + ": a state dict key is not a string");
      const std::string key = entry.key().toStringRef();
      if (!entry.value().isTensor())
        throw std::runtime_error(inputs[best] + ": '" + key + "' is not a tensor");
      const at::Tensor ref = entry.value().toTensor();
      if (!ref.is_floating_point()) {
        out.insert(key, ref.clone());
        continue;
      }
      at::Tensor acc = torch::zeros_like(ref, torch::kFloat64);
      for (size_t i = 0; i < dicts.size(); ++i) {
        if (!dicts[i].contains(entry.key()) || !dicts[i].at(entry.key()).isTensor())
          throw std::runtime_error(inputs[i] + ": has no tensor '" + key + "'");
        const at::Tensor t = dicts[i].at(entry.key()).toTensor();
        if (t.sizes() != ref.sizes())
          throw std::runtime_error(inputs[i] + ": '" + key + "' has another shape");
        acc.add_(t.to(torch::kFloat64), weights[i] / total);
      }
      out.insert(key, acc.to(ref.scalar_type()).contiguous());
    }
    const std::vector<char> bytes = torch::pickle_save(c10::IValue(out));
    const std::string tmp = output + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      f.flush();
      if (!f) throw std::runtime_error(tmp + ": cannot write checkpoint");
    }
    if (std::rename(tmp.c_str(), output.c_str()) != 0)
      throw std::runtime_error(output + ": cannot rename the averaged checkpoint into place");
  }
};

}  // namespace

std::unique_ptr<CheckpointAverager> make_torch_averager() { return std::make_unique<TorchAverager>(); }

}  // namespace cellsched::runner
