// Every public header compiles from C++ on its own (the header-*.cpp objects
// linked in) and libkvrt links from C++.
#include <kvrt/dlpack.h>
#include <kvrt/kvrt.h>
#include <kvrt/plugin.h>

#include <cstdio>

int main()
{
    kvrt_layout l;
    int st = kvrt_layout_parse("NHD", &l);
    std::printf("1..1\n%s 1 - C++ calls libkvrt: NHD is %s\n",
                st == KVRT_OK && l == KVRT_LAYOUT_LBNHC ? "ok" : "not ok", kvrt_layout_name(l));
    return 0;
}
