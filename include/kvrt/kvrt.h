/* kvrt — umbrella header: everything an engine needs. */
#ifndef KVRT_KVRT_H
#define KVRT_KVRT_H

#include <kvrt/version.h>
#include <kvrt/common.h>
#include <kvrt/device.h>
#include <kvrt/layout.h>
#include <kvrt/dtype.h>
#include <kvrt/spec.h>
#include <kvrt/geometry.h>
#include <kvrt/placement.h>
#include <kvrt/transfer.h>
#include <kvrt/trace.h>
#include <kvrt/resolve.h>
#include <kvrt/runtime.h>
#include <kvrt/wrap.h>
#include <kvrt/model.h>
#include <kvrt/parallel.h>

#endif
