/*
 * render_svg.c: the small SVG writer `ringctl render`'s pictures share
 * (render.h): the document, escaped text, rectangles and the palette.
 *
 * Text is the only place cluster data enters a picture (node ids, label
 * values), so it goes through svg_escape and nowhere else.
 */
#include "render.h"

/* Tableau's 20 colours: distinguishable side by side and in print. */
static const char *const palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                      "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#1f77b4",
                                      "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                      "#e377c2", "#17becf", "#bcbd22", "#aec7e8", "#98df8a"};

const char *svg_colour(uint32_t i) { return palette[i % (sizeof palette / sizeof palette[0])]; }

void svg_begin(FILE *f, const char *title) {
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
          RENDER_W, RENDER_H, RENDER_W, RENDER_H);
  svg_text(f, 24, 34, 20, "start", "font-weight=\"bold\"", "%s", title);
}

int svg_end(FILE *f) {
  fputs("</svg>\n", f);
  return ferror(f) ? -1 : 0;
}

void svg_escape(FILE *f, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '&')
      fputs("&amp;", f);
    else if (c == '<')
      fputs("&lt;", f);
    else if (c == '>')
      fputs("&gt;", f);
    else if (c == '"')
      fputs("&quot;", f);
    else if (c == '\'')
      fputs("&apos;", f);
    else
      fputc(c < 0x20 || c == 0x7f ? '?' : c, f); /* XML 1.0 allows no control characters */
  }
}

void svg_text(FILE *f, double x, double y, double size, const char *anchor, const char *attrs,
              const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap); /* a longer text is cut: ids are at most 63 bytes */
  va_end(ap);
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"%s\"%s%s>", x, y, size,
          anchor, attrs[0] ? " " : "", attrs);
  svg_escape(f, buf);
  fputs("</text>\n", f);
}

void svg_rect(FILE *f, double x, double y, double w, double h, const char *fill) {
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", x, y,
          w > 0 ? w : 0, h > 0 ? h : 0, fill);
}
