// SPDX-License-Identifier: MIT
/*
 * vpackctl simulate --svg: the level 2 timeline as an SVG drawing.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simulate.h"
#include "vpackctl.h"

/* Columns of the SVG timeline at most. */
#define SVG_COLUMNS 1000

/* A colour for package index p. */
static void pkg_colour(unsigned p, char *buf, size_t len)
{
    snprintf(buf, len, "hsl(%u,65%%,55%%)", (p * 360 / 7 + 30) % 360);
}

/* The mean of timeline series `series` (0 demand in packages' worth, 1 active, 2 the capacity
 * bound) over points a..b-1. */
static double tl_mean(const struct sim *sim, int series, unsigned long a, unsigned long b,
                      double cores_per_pkg)
{
    double sum = 0;

    for (unsigned long i = a; i < b; i++)
        sum += series == 0   ? sim->tl[i].demand / cores_per_pkg
               : series == 1 ? sim->tl[i].active
                             : sim->tl[i].bound;
    return b > a ? sum / (double)(b - a) : 0;
}

/* A step line through the columns' values, a point only where the value changes. */
static void svg_steps(FILE *f, const double *v, unsigned cols, double x0, double cw, double y0,
                      double scale)
{
    double prev = y0 - scale * v[0];

    fprintf(f, "%.1f,%.1f", x0, prev);
    for (unsigned c = 1; c < cols; c++) {
        double y = y0 - scale * v[c];

        if (fabs(y - prev) >= 0.05) {
            fprintf(f, " %.1f,%.1f %.1f,%.1f", x0 + c * cw, prev, x0 + c * cw, y);
            prev = y;
        }
    }
    fprintf(f, " %.1f,%.1f", x0 + cols * cw, prev);
}

/* Hours between time ticks: at most 12 ticks. */
static double tick_hours(double hours)
{
    static const double steps[] = {1.0 / 60, 5.0 / 60, 0.25, 0.5, 1, 2, 3, 4, 6, 12, 24, 48, 168};

    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        if (hours / steps[i] <= 12)
            return steps[i];
    return hours / 12;
}

/*
 * The level 2 timeline as SVG: the demand in packages' worth of cores, the
 * packages with work on them and the capacity bound, on one package scale;
 * a strip coloured by the wake-up package; the day's figures underneath.
 */
int simulate_write_svg(const struct sim *sim, const struct figures *fg, const char *path)
{
    const double W = 1000, H = 400, top = 50, plot = 230, left = 56, right = 16;
    unsigned cols = sim->ntl < SVG_COLUMNS ? (unsigned)sim->ntl : SVG_COLUMNS;
    unsigned np = sim->topo->npackages, gstep;
    double cores = 0, cw, ymax, hours = sim->seconds / 3600, th, strip = top + plot + 30;
    double *v = NULL;
    FILE *f;

    if (cols == 0) {
        vpackctl_err("simulate: --svg: no interval to draw");
        return -1;
    }
    for (unsigned p = 0; p < np; p++)
        cores += sim->topo->packages[p].ncores;
    if (!(v = malloc(cols * sizeof(*v)))) {
        vpackctl_err("simulate: out of memory");
        return -1;
    }
    f = fopen(path, "w");
    if (!f) {
        vpackctl_err("simulate: %s: %s", path, strerror(errno));
        free(v);
        return -1;
    }
    cw = (W - left - right) / cols;
    ymax = np > 0 ? np : 1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"13\">\n",
            W, H, W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"20\" font-size=\"15\" font-weight=\"bold\">vpack level 2 "
               "on %u packages (%.0f cores), %.1f h, %lu domains</text>\n",
            left, np, cores, hours, sim->ndomains);
    /* Legend. */
    fprintf(f, "<g font-size=\"12\">"
               "<line x1=\"%.0f\" y1=\"36\" x2=\"%.0f\" y2=\"36\" stroke=\"#1f5fbf\" stroke-width=\"1.5\"/>"
               "<text x=\"%.0f\" y=\"40\">demand (packages' worth of cores)</text>"
               "<line x1=\"%.0f\" y1=\"36\" x2=\"%.0f\" y2=\"36\" stroke=\"#d62728\" stroke-width=\"2.5\"/>"
               "<text x=\"%.0f\" y=\"40\">packages with work (vpack)</text>"
               "<line x1=\"%.0f\" y1=\"36\" x2=\"%.0f\" y2=\"36\" stroke=\"#444\" stroke-width=\"1.5\" "
               "stroke-dasharray=\"5,3\"/><text x=\"%.0f\" y=\"40\">capacity bound (fewest packages)</text></g>\n",
            left, left + 24, left + 30, left + 270, left + 294, left + 300, left + 490, left + 514,
            left + 520);
    /* Package grid and labels. */
    gstep = np <= 8 ? 1 : (np + 7) / 8;
    for (unsigned k = 0; k <= np; k += gstep) {
        double y = top + plot - plot * k / ymax;

        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"%s\"/>"
                   "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%u</text>\n",
                left, y, W - right, y, k ? "#e4e4e4" : "black", left - 6, y + 4, k);
    }
    fprintf(f, "<text x=\"14\" y=\"%.0f\" transform=\"rotate(-90 14 %.0f)\" "
               "text-anchor=\"middle\">packages</text>\n",
            top + plot / 2, top + plot / 2);
    /* Time axis. */
    th = tick_hours(hours);
    for (double t = 0; t <= hours + 1e-9; t += th) {
        double x = left + (W - left - right) * (hours > 0 ? t / hours : 0);

        fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"black\"/>",
                x, top + plot, x, top + plot + 5);
        if (th < 1)
            fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%.0f min</text>\n", x,
                    top + plot + 18, t * 60);
        else
            fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%.0f h</text>\n", x,
                    top + plot + 18, t);
    }
    /* The three series, each the mean over its column's intervals. */
    for (int series = 0; series < 3; series++) {
        static const char *const style[] = {
            "stroke=\"#1f5fbf\" stroke-width=\"1.5\"",
            "stroke=\"#d62728\" stroke-width=\"2.5\"",
            "stroke=\"#444\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\"",
        };

        for (unsigned c = 0; c < cols; c++)
            v[c] = tl_mean(sim, series, (unsigned long)c * sim->ntl / cols,
                           (unsigned long)(c + 1) * sim->ntl / cols, np ? cores / np : 1);
        fprintf(f, "<polyline fill=\"none\" %s points=\"", style[series]);
        svg_steps(f, v, cols, left, cw, top + plot, plot / ymax);
        fprintf(f, "\"/>\n");
    }
    /* The wake-up package strip: one rectangle per run of the same package. */
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\" font-size=\"11\">wake-up</text>\n",
            left - 6, strip + 11);
    for (unsigned c = 0, start = 0; c < cols; c++) {
        unsigned long i = (unsigned long)(c + 1) * sim->ntl / cols - 1;
        int w = sim->tl[i].wakeup;
        int pi = w >= 0 ? vpack_topology_package_index(sim->topo, w) : -1;
        int next = -2;
        char colour[32];

        if (c + 1 < cols) {
            int wn = sim->tl[(unsigned long)(c + 2) * sim->ntl / cols - 1].wakeup;
            next = wn >= 0 ? vpack_topology_package_index(sim->topo, wn) : -1;
        }
        if (next == pi)
            continue;
        if (pi < 0)
            snprintf(colour, sizeof(colour), "#dddddd");
        else
            pkg_colour((unsigned)pi, colour, sizeof(colour));
        fprintf(f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.2f\" height=\"14\" fill=\"%s\"/>\n",
                left + start * cw, strip, (c + 1 - start) * cw, colour);
        start = c + 1;
    }
    for (unsigned p = 0; p < np && p < 8; p++) {
        char colour[32];

        pkg_colour(p, colour, sizeof(colour));
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                   "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\">wake-up package %d</text>\n",
                left + p * 150.0, strip + 22, colour, left + p * 150.0 + 16, strip + 32,
                sim->topo->packages[p].id);
    }
    /* The figures of the whole run. */
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">level 2 against level 0: energy %+.1f%%, served "
               "work %.4f of level 0, %.1f moves per hour</text>\n",
            left, H - 28, -100 * fg[2].saving,
            fg[0].t.served > 0 ? fg[2].t.served / fg[0].t.served : 1, fg[2].moves_per_hour);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">package-seconds with work: level 2 %.0f, capacity "
               "bound %.0f (level 2 %+.1f%%), level 0 %.0f</text>\n",
            left, H - 10, fg[2].t.active_pkg_s, sim->bound.package_s, 100 * fg[2].vs_bound,
            fg[0].t.active_pkg_s);
    fprintf(f, "</svg>\n");
    free(v);
    if (fclose(f) != 0) {
        vpackctl_err("simulate: %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

