// What a refused command line is told besides the refusal: the flag it most likely meant, for a
// flag no command has. Pure; the command line's parser (suites/harness/main.cpp) gives it the
// names its command knows.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlb {

// Edits (insertions, deletions, substitutions, swaps of two neighbours) from `a` to `b`.
int64_t edit_distance(std::string_view a, std::string_view b);

// Of `known` (long flag names, without their dashes), the one nearest `given` (a command-line
// token such as "--modle=resnet18"), where it is 2 edits or fewer and fewer than half the
// name's letters: "model". Nothing for a token that is not a long flag, that names a known flag, or
// that is near none.
std::optional<std::string> nearest_flag(std::string_view given,
                                        const std::vector<std::string>& known);

// The same for a bare word (a subcommand's name): the nearest of `known`, by the same rule;
// nothing where it is one of them or near none.
std::optional<std::string> nearest_name(std::string_view name,
                                        const std::vector<std::string>& known);

}  // namespace dlb
