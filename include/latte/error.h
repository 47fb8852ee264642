// latte::Error — the one exception type the library throws for bad input.
// Messages name the file, key, tensor or flag and what was expected.
#pragma once
#include <stdexcept>
#include <string>

namespace latte {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace latte
