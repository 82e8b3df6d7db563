#pragma once
// The filter registry, filled by the files that implement each group of
// filters. Internal to model/chat.

#include <string_view>
#include <unordered_map>

#include "model/chat/builtins.hpp"

namespace troupe::jinja {

using filter_table = std::unordered_map<std::string_view, filter_function>;

/// int, float, round.
void add_number_filters(filter_table& table);
/// first, last, join, list, items, map, select..., sort, unique, sum, min, max, batch, slice, dictsort, groupby,
/// pprint.
void add_sequence_filters(filter_table& table);

}  // namespace troupe::jinja
