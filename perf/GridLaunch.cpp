//===- GridLaunch.cpp - the interface a GPU target's launches come by -----===//

#include "perf/GridLaunch.h"

#include "perf/GridLaunchInterface.cpp.inc"
