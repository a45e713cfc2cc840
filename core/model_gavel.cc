// The LSTM language model, the recommendation autoencoder and CycleGAN of
// Gavel's measured table (stanford-futuredata/gavel workloads/pytorch/
// language_modeling, recommendation and cyclegan), as layer sequences with
// analytic sizes. Gavel's Transformer is a GPT-family description (core/model.cc).
#include "core/model_build.h"

#include <algorithm>

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

namespace cellsched {

GanParts gan_parts(const LayerSpec& l) {
  GanParts g;
  const bool residual = l.kind == "gan_residual";
  g.convs = residual ? 2 : 1;
  g.upsample = l.kind == "gan_up";
  g.conv_stride = g.upsample ? 1 : std::max(1, l.stride);
  g.out_spatial = g.upsample ? 2 * l.spatial : l.spatial / g.conv_stride;
  g.reflect_pad = residual || l.kernel == 7 ? l.kernel / 2 : 0;
  // The discriminators' first block (on the RGB image) has no norm.
  g.norm = l.kind == "gan_conv" || g.upsample || residual || (l.kind == "gan_disc" && l.in_channels != 3);
  g.activation = l.kind == "gan_out"        ? GanActivation::Tanh
                 : l.kind == "gan_disc"     ? GanActivation::LeakyRelu
                 : l.kind == "gan_disc_out" ? GanActivation::None
                                            : GanActivation::Relu;
  return g;
}

}  // namespace cellsched

namespace cellsched::detail {

ModelSpec cyclegan(std::string name, int image, int blocks, int channels) {
  ModelSpec m;
  m.name = std::move(name);
  m.family = "cyclegan";
  m.image = image;
  m.num_layers = blocks;
  m.hidden = channels;
  return m;
}

namespace {

// A convolution layer of a generator or discriminator: `in` channels at
// `si` x `si` to `out` (at the size gan_parts derives), a k x k kernel (with
// its bias), `passes` images per sample; `saved` values per image kept for backward.
LayerSpec gan_layer(const std::string& name, const char* kind, int in, int out, int k, int stride, int si,
                    int passes, double saved, double bpv) {
  LayerSpec l;
  l.name = name;
  l.kind = kind;
  l.in_channels = in;
  l.out_channels = out;
  l.kernel = k;
  l.stride = stride;
  l.spatial = si;
  l.passes = passes;
  const GanParts g = gan_parts(l);
  const double convs = g.convs, so = g.out_spatial;
  l.params = convs * (double(in) * out * k * k + out);
  l.flops_per_sample = passes * convs * 2.0 * in * out * k * k * so * so;
  l.activation_bytes_per_sample = passes * out * so * so * bpv;
  l.saved_bytes_per_sample = passes * saved * bpv;
  l.shape_key = std::string(kind) + ":i" + std::to_string(in) + ":o" + std::to_string(out) + ":k" +
                std::to_string(k) + ":s" + std::to_string(stride) + ":x" + std::to_string(si) + ":p" +
                std::to_string(passes);
  return l;
}

}  // namespace

void add_cyclegan_layers(ModelSpec& m) {
  const int S = m.image, c = m.hidden, p = 3;
  const double bpv = m.bytes_per_value, sq = double(S) * S;
  for (const char* g : {"g_ab.", "g_ba."}) {
    const std::string n = g;
    // Saved per image: each conv's input, its output and the norm's (the ReLU's) output.
    m.layers.push_back(gan_layer(n + "stem", "gan_conv", 3, c, 7, 1, S, p, 3 * sq + 2 * c * sq, bpv));
    m.layers.push_back(gan_layer(n + "down1", "gan_conv", c, 2 * c, 3, 2, S, p, c * sq + 2 * 2 * c * sq / 4, bpv));
    m.layers.push_back(
        gan_layer(n + "down2", "gan_conv", 2 * c, 4 * c, 3, 2, S / 2, p, 2 * c * sq / 4 + 2 * 4 * c * sq / 16, bpv));
    for (int b = 0; b < m.num_layers; ++b)  // two padded convs and norms, a ReLU between
      m.layers.push_back(gan_layer(n + "res." + std::to_string(b), "gan_residual", 4 * c, 4 * c, 3, 1, S / 4, p,
                                   5 * 4 * c * sq / 16, bpv));
    m.layers.push_back(gan_layer(n + "up1", "gan_up", 4 * c, 2 * c, 3, 1, S / 4, p, 3 * 2 * c * sq / 4, bpv));
    m.layers.push_back(gan_layer(n + "up2", "gan_up", 2 * c, c, 3, 1, S / 2, p, 3 * c * sq, bpv));
    m.layers.push_back(gan_layer(n + "out", "gan_out", c, 3, 7, 1, S, p, c * sq + 2 * 3 * sq, bpv));
  }
  for (const char* d : {"d_a.", "d_b."}) {
    const std::string n = d;
    int in = 3, out = c, s = S;
    for (int b = 1; b <= 4; ++b, in = out, out *= 2, s /= 2)
      m.layers.push_back(gan_layer(n + "block" + std::to_string(b), "gan_disc", in, out, 4, 2, s, p,
                                   double(in) * s * s + 2.0 * out * s * s / 4, bpv));
    m.layers.push_back(gan_layer(n + "out", "gan_disc_out", in, 1, 4, 1, s, p, double(in) * s * s + s * s, bpv));
  }
}

}  // namespace cellsched::detail
