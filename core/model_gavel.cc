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

void add_autoencoder_layers(ModelSpec& m) {
  const double items = m.vocab, h = m.hidden, bpv = m.bytes_per_value;
  LayerSpec enc;
  enc.name = "encoder";
  enc.kind = "dense";
  enc.in_channels = m.vocab;
  enc.out_channels = m.hidden;
  enc.shape_key = "dense:i" + std::to_string(m.vocab) + ":o" + std::to_string(m.hidden);
  enc.params = items * h + h;
  enc.flops_per_sample = 2 * items * h;
  enc.activation_bytes_per_sample = h * bpv;
  enc.saved_bytes_per_sample = (items + 2 * h) * bpv;  // input (dropout mask), pre- and post-tanh
  m.layers.push_back(enc);
  LayerSpec dec;
  dec.name = "head";
  dec.kind = "dense_head";
  dec.in_channels = m.hidden;
  dec.out_channels = m.vocab;
  dec.shape_key = "dense-head:i" + std::to_string(m.hidden) + ":o" + std::to_string(m.vocab);
  dec.params = h * items + items;
  dec.flops_per_sample = 2 * h * items;
  dec.activation_bytes_per_sample = items * bpv;
  dec.saved_bytes_per_sample = (h + items) * bpv;
  m.layers.push_back(dec);
}

}  // namespace cellsched::detail
