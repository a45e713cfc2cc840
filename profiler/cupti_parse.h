// Internal, CUDA builds only: turns a raw CUPTI activity buffer into plain
// records. Declared without CUDA types so tests can feed it buffers they
// synthesize with cupti.h's record structs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "profiler/cupti_records.h"

namespace cellsched::profiler::detail {

// Walks `valid_bytes` of `buffer` with cuptiActivityGetNextRecord, keeping
// CONCURRENT_KERNEL / KERNEL and EXTERNAL_CORRELATION records.
ActivityRecords parse_cupti_buffer(uint8_t* buffer, size_t valid_bytes);

}  // namespace cellsched::profiler::detail
