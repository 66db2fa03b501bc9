# Turns a browser script into a C string: cmake -DVAR=name -DSRC=in.js
# -DOUT=out.c -P embed_js.cmake. The pages wrap scripts in a CDATA section
# and promise no "//" anywhere (tests look for external references by it),
# so a script holding "//", "]]>", "</script", or what reads as a link
# ("http:", "src=", "href=", "url(", "@import", "xlink:"), fails the build.
file(READ "${SRC}" text)
foreach(bad "//" "]]>" "</script")
  string(FIND "${text}" "${bad}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "${SRC}: holds \"${bad}\" (offset ${at}); use /* */ comments")
  endif()
endforeach()
# nor anything the report tests read as a reference out of the page
string(TOLOWER "${text}" lower)
foreach(bad "https?:" "(^|[^a-z0-9_])src[ \t]*=" "(^|[^a-z0-9_])href[ \t]*=" "url\\(" "@import"
        "xlink:")
  string(REGEX MATCH "${bad}" hit "${lower}")
  if(hit)
    message(FATAL_ERROR "${SRC}: holds \"${hit}\", which reads as a reference out of the page")
  endif()
endforeach()
file(READ "${SRC}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}.tmp" "/* generated from ${SRC} by scripts/embed_js.cmake */\n"
     "const char ${VAR}[] = {\n${bytes}0};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
