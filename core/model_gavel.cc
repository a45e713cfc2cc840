// The LSTM language model and the recommendation autoencoder of Gavel's
// measured table (stanford-futuredata/gavel workloads/pytorch/
// language_modeling and recommendation), as layer sequences with analytic
// sizes. Gavel's Transformer is a GPT-family description (core/model.cc).
#include "core/model_build.h"

namespace cellsched::detail {

ModelSpec lstm(std::string name, int hidden, int layers, int seq, int vocab) {
  ModelSpec m;
  m.name = std::move(name);
  m.family = "lstm";
  m.hidden = hidden;
  m.num_layers = layers;
  m.seq = seq;
  m.vocab = vocab;
  return m;
}

ModelSpec autoencoder(std::string name, int items, int hidden) {
  ModelSpec m;
  m.name = std::move(name);
  m.family = "autoencoder";
  m.vocab = items;
  m.hidden = hidden;
  return m;
}

void add_lstm_layers(ModelSpec& m) {
  const double h = m.hidden, s = m.seq, v = m.vocab, bpv = m.bytes_per_value;
  LayerSpec emb;
  emb.name = "embedding";
  emb.kind = "embedding";
  emb.shape_key = "lstm-embedding:v" + std::to_string(m.vocab) + ":h" + std::to_string(m.hidden) + ":s" +
                  std::to_string(m.seq);
  emb.params = v * h;
  emb.activation_bytes_per_sample = s * h * bpv;
  emb.saved_bytes_per_sample = s * 8;  // token ids
  m.layers.push_back(emb);
  for (int i = 0; i < m.num_layers; ++i) {
    LayerSpec l;
    l.name = "lstm." + std::to_string(i);
    l.kind = "lstm";
    l.shape_key = "lstm:h" + std::to_string(m.hidden) + ":s" + std::to_string(m.seq);
    l.params = 8 * h * h + 8 * h;              // input and recurrent weights of 4 gates, two biases
    l.flops_per_sample = 2 * s * 8 * h * h;    // both products at every step
    l.activation_bytes_per_sample = s * h * bpv;
    l.saved_bytes_per_sample = s * h * 7 * bpv;  // gates, cell and hidden state per step
    l.in_channels = m.hidden;
    l.out_channels = m.hidden;
    m.layers.push_back(l);
  }
  LayerSpec head;
  head.name = "head";
  head.kind = "head";
  head.shape_key = "lstm-head:v" + std::to_string(m.vocab) + ":h" + std::to_string(m.hidden) + ":s" +
                   std::to_string(m.seq);
  head.params = v * h + v;
  head.flops_per_sample = 2 * s * h * v;
  head.activation_bytes_per_sample = s * v * bpv;
  head.saved_bytes_per_sample = s * h * bpv + s * v * bpv;
  m.layers.push_back(head);
}

namespace {

// A fully connected layer of `in` -> `out` values per sample.
LayerSpec dense(const char* name, const char* kind, int in, int out, double saved_values, double bpv) {
  LayerSpec l;
  l.name = name;
  l.kind = kind;
  l.in_channels = in;
  l.out_channels = out;
  l.shape_key = std::string(kind) + ":i" + std::to_string(in) + ":o" + std::to_string(out);
  l.params = double(in) * out + out;
  l.flops_per_sample = 2.0 * in * out;
  l.activation_bytes_per_sample = out * bpv;
  l.saved_bytes_per_sample = saved_values * bpv;
  return l;
}

}  // namespace

void add_autoencoder_layers(ModelSpec& m) {
  const double items = m.vocab, h = m.hidden, bpv = m.bytes_per_value;
  // Saved: the encoder's input (its dropout mask) and the pre- and post-tanh
  // code; the head's input and logits.
  m.layers.push_back(dense("encoder", "dense", m.vocab, m.hidden, items + 2 * h, bpv));
  m.layers.push_back(dense("head", "dense_head", m.hidden, m.vocab, h + items, bpv));
}

}  // namespace cellsched::detail
