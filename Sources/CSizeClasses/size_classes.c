/* CSizeClasses is its header (size_classes.h): static inline helpers only. */
#include "size_classes.h"
