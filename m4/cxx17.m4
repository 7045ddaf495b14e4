# AX_SRC_CHECK_CXX17: stop unless the C++ compiler accepts -std=gnu++17.
AC_DEFUN([AX_SRC_CHECK_CXX17], [
    save_CXXFLAGS=$CXXFLAGS
    CXXFLAGS="-std=gnu++17 $CXXFLAGS"
    AC_MSG_CHECKING([whether $CXX supports C++17])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <optional>
                                         #include <string_view>]],
                                       [[std::optional<std::string_view> s; return s.has_value();]])],
                      [AC_MSG_RESULT([yes])],
                      [AC_MSG_RESULT([no])
                       AC_MSG_ERROR([$CXX does not support C++17; install g++ 8 or newer])])
    CXXFLAGS=$save_CXXFLAGS
])
