// toml++'s implementation, compiled once here (TOML_HEADER_ONLY=0 everywhere, see CMakeLists.txt):
// qtransit links no toml++ shared library.
#define TOML_IMPLEMENTATION
#include <toml++/toml.h>
