/*
 * render_svg.c: the small SVG writer `ringctl render`'s pictures share
 * (render.h): the document, escaped text, rectangles and the palette.
 *
 * Text is the only place cluster data enters a picture (node ids, label
 * values), so it goes through svg_escape and nowhere else.
 */
#include "render.h"

/* The palette is the status page's too (cluster.h). */
const char *svg_colour(uint32_t i) { return rk_colour(i); }

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

static void rect(FILE *f, double x, double y, double w, double h, const char *fill,
                 const char *id) {
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"", x, y,
          w > 0 ? w : 0, h > 0 ? h : 0, fill);
  if (id != NULL) {
    fputs(" data-node=\"", f);
    svg_escape(f, id);
    fputs("\"", f);
  }
  fputs("/>\n", f);
}

void svg_rect(FILE *f, double x, double y, double w, double h, const char *fill) {
  rect(f, x, y, w, h, fill, NULL);
}

void svg_node_rect(FILE *f, double x, double y, double w, double h, const char *id) {
  rect(f, x, y, w, h, rk_node_colour(id), id);
}
