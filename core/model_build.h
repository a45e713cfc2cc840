// Layer builders shared by core/model.cc (GPT, MoE, WRN, the build step),
// core/model_yaml.cc (model files) and
// core/model_gavel.cc (the LSTM language model and the recommendation
// autoencoder of Gavel's measured table). Internal to core/.
#pragma once

#include <initializer_list>
#include <map>
#include <string>

#include "core/model.h"

namespace cellsched::detail {

// Where a model file gave each field, for errors that concern one or two of
// them ("hidden must be a multiple of heads" names the heads line).
struct FieldLines {
  long root = 0;                      // the map's own line (0: not from a file)
  std::map<std::string, long> field;  // field name -> line
  // The line of the first of `keys` the file gave, else the map's.
  long of(std::initializer_list<const char*> keys) const {
    for (const char* k : keys)
      if (auto it = field.find(k); it != field.end()) return it->second;
    return root;
  }
  bool has(const char* key) const { return field.count(key) > 0; }
};

// Checks a family's parameters and builds its layers (errors name file:line:
// the line of the field at fault, or the map's for a field left out).
void build_layers(ModelSpec& m, const std::string& file, const FieldLines& lines);

// Zoo entries of these families (layers are added by the zoo's build step).
ModelSpec lstm(std::string name, int hidden, int layers, int seq, int vocab);
ModelSpec autoencoder(std::string name, int items, int hidden);

// family "lstm": embedding (vocab x hidden), num_layers LSTM layers of width
// hidden over seq steps, the softmax head over the vocabulary.
void add_lstm_layers(ModelSpec& m);

// family "autoencoder": items -> hidden (tanh) -> items, with a per-item
// logistic loss (Gavel's Recommendation job: recoder on MovieLens-20M). The
// input is one user's item vector: `vocab` = items, `hidden` = code width.
void add_autoencoder_layers(ModelSpec& m);

// family "cyclegan" (Gavel's CycleGAN: PyTorch-GAN's implementation at
// `image` x `image`): two ResNet generators (a 7x7 stem of `hidden`
// channels, two stride-2 downsamplings, `num_layers` residual blocks, two
// nearest-upsampling convolutions, a 7x7 output) and two PatchGAN
// discriminators (four 4x4 stride-2 blocks, a 4x4 output), instance norm.
ModelSpec cyclegan(std::string name, int image, int blocks, int channels);
void add_cyclegan_layers(ModelSpec& m);

}  // namespace cellsched::detail
