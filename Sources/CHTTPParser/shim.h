#include <http_parser.h>
