//! SVG charts drawn with plotters' SVG backend: text is emitted as SVG `<text>` and laid
//! out by the browser, so nothing is fetched or loaded at run time.

use crate::metrics::Latency;
use crate::sample::CpuRow;
use crate::stats::Summary;
use crate::{LabError, LabResult};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// A chart of a report page.
#[derive(Debug, Clone)]
pub enum Chart {
    /// Medians as vertical bars with min-max whiskers, one per name; a `grey` bar is
    /// dimmed (client-bound).
    Bars {
        title: String,
        axis: String,
        names: Vec<String>,
        values: Vec<Option<Summary>>,
        grey: Vec<bool>,
    },
    /// Medians as horizontal bars with min-max whiskers, names on the left (long names,
    /// many cells).
    HBars {
        title: String,
        axis: String,
        names: Vec<String>,
        values: Vec<Option<Summary>>,
    },
    /// Per name, one stacked bar per CPU: usr, sys, soft+irq, idle, with the legend.
    CpuStacks {
        names: Vec<String>,
        cpus: Vec<Vec<CpuRow>>,
    },
    /// Round-trip latency percentiles per name, log scale.
    Latency {
        names: Vec<String>,
        latency: Vec<Latency>,
    },
    /// Lines of (x, y) points, y on a log scale, one per name (latency against load).
    Curves {
        title: String,
        x_axis: String,
        series: Vec<(String, Vec<(f64, f64)>)>,
    },
}

impl Chart {
    /// The chart as inline SVG (and, for the CPU stacks, the legend under it).
    pub fn svg(&self) -> LabResult<String> {
        match self {
            Chart::Bars {
                title,
                axis,
                names,
                values,
                grey,
            } => bars(names, values, grey, title, axis, (540, 400)),
            Chart::HBars {
                title,
                axis,
                names,
                values,
            } => summary_hbars(names, values, title, axis),
            Chart::CpuStacks { names, cpus } => {
                let legend: String = CPU_PARTS
                    .iter()
                    .map(|(name, (r, g, b))| {
                        format!(
                            "<span class=\"key\" style=\"background:rgb({r},{g},{b})\"></span>{name} "
                        )
                    })
                    .collect();
                Ok(format!(
                    "{}<div class=\"legend\">{legend}</div>",
                    cpu_stacks(names, cpus)?
                ))
            }
            Chart::Latency { names, latency } => latency_lines(names, latency),
            Chart::Curves {
                title,
                x_axis,
                series,
            } => {
                let xs = series.iter().flat_map(|(_, p)| p.iter().map(|x| x.0));
                let (lo, hi) = xs.fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(x), h.max(x)));
                let (lo, hi) = if lo <= hi { (lo, hi) } else { (0.0, 1.0) };
                let pad = ((hi - lo) * 0.05).max(0.5);
                let fmt = |x: &f64| super::num(*x);
                log_lines(title, series, (lo - pad)..(hi + pad), x_axis, 6, &fmt)
            }
        }
    }
}

fn err(e: impl std::fmt::Display) -> LabError {
    LabError::Run(format!("drawing a chart: {e}"))
}

/// Label of x position `x` among `names` (bars sit on integer positions).
fn label(names: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 1e-6 || i < 0.0 {
        return String::new();
    }
    names.get(i as usize).cloned().unwrap_or_default()
}

/// A chart with one slot per name on x (labelled with it) and `y` on y, mesh drawn; bars
/// are then drawn at x = 0, 1, ...
fn row_chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    names: &[String],
    title: &str,
    y: std::ops::Range<f64>,
    y_desc: &str,
    y_fmt: &dyn Fn(&f64) -> String,
) -> LabResult<ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>> {
    let n = names.len().max(1) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..n - 0.5, y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(names.len().max(2))
        .x_label_formatter(&|x| label(names, *x))
        .y_desc(y_desc)
        .y_label_formatter(y_fmt)
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// The end of a value axis: the largest max times `headroom`, or 1 when nothing is above 0.
fn axis_top(values: &[Option<Summary>], headroom: f64) -> f64 {
    let top = values
        .iter()
        .filter_map(|s| s.map(|s| s.max))
        .fold(0.0f64, f64::max);
    if top > 0.0 {
        top * headroom
    } else {
        1.0
    }
}

fn bars(
    names: &[String],
    values: &[Option<Summary>],
    grey: &[bool],
    title: &str,
    y_desc: &str,
    size: (u32, u32),
) -> LabResult<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let top = axis_top(values, 1.15);
        let mut chart = row_chart(&root, names, title, 0.0..top, y_desc, &|y| super::si(*y))?;
        for (i, v) in values.iter().enumerate() {
            let Some(s) = v else { continue };
            let x = i as f64;
            let color = if grey.get(i).copied().unwrap_or(false) {
                RGBColor(170, 170, 170)
            } else {
                RGBColor(46, 110, 180)
            };
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x - 0.35, 0.0), (x + 0.35, s.median)],
                    color.filled(),
                )))
                .map_err(err)?;
            let whisker = vec![
                PathElement::new(vec![(x, s.min), (x, s.max)], BLACK.stroke_width(2)),
                PathElement::new(
                    vec![(x - 0.1, s.min), (x + 0.1, s.min)],
                    BLACK.stroke_width(2),
                ),
                PathElement::new(
                    vec![(x - 0.1, s.max), (x + 0.1, s.max)],
                    BLACK.stroke_width(2),
                ),
            ];
            chart.draw_series(whisker).map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Medians as horizontal bars with min-max whiskers, one per name, names on the left (the
/// stream matrix's throughput, CPU and ROI per cell: long names, many cells); a missing
/// value leaves its slot empty.
pub fn summary_hbars(
    names: &[String],
    values: &[Option<Summary>],
    title: &str,
    x_desc: &str,
) -> LabResult<String> {
    let n = names.len().max(1);
    let mut svg = String::new();
    {
        let size = (620, 22 * n as u32 + 110);
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let top = axis_top(values, 1.1);
        // Slot i sits at y = n - 1 - i, so the first name is on top.
        let y = |i: usize| (n - 1 - i) as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(250)
            .build_cartesian_2d(0.0..top, -0.5..n as f64 - 0.5)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&|v| {
                let i = v.round();
                if (v - i).abs() > 1e-6 || i < 0.0 || i as usize >= n {
                    return String::new();
                }
                names[n - 1 - i as usize].clone()
            })
            .x_desc(x_desc)
            .x_label_formatter(&|x| super::num(*x))
            .draw()
            .map_err(err)?;
        for (i, v) in values.iter().enumerate() {
            let Some(s) = v else { continue };
            let c = y(i);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(0.0, c - 0.35), (s.median, c + 0.35)],
                    RGBColor(46, 110, 180).filled(),
                )))
                .map_err(err)?;
            let w = BLACK.stroke_width(1);
            chart
                .draw_series([
                    PathElement::new(vec![(s.min, c), (s.max, c)], w),
                    PathElement::new(vec![(s.min, c - 0.2), (s.min, c + 0.2)], w),
                    PathElement::new(vec![(s.max, c - 0.2), (s.max, c + 0.2)], w),
                ])
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// The parts of a CPU's time in [`cpu_stacks`], bottom to top, with their colours; the page
/// draws the legend from this (a legend inside the plot would cover the bars).
pub const CPU_PARTS: [(&str, (u8, u8, u8)); 4] = [
    ("usr", (76, 175, 80)),
    ("sys", (229, 115, 0)),
    ("soft+irq", (198, 40, 40)),
    ("idle", (224, 224, 224)),
];

/// For each row, one stacked bar per CPU: usr, sys, soft+irq, idle (percent), as in the
/// NTT talk's `sar -u ALL -P ALL`.
pub fn cpu_stacks(names: &[String], cpus: &[Vec<CpuRow>]) -> LabResult<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (540, 400)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = row_chart(
            &root,
            names,
            "Per-CPU time: usr / sys / soft+irq / idle",
            0.0..100.0,
            "% of each CPU (bars left to right: CPU 0, 1, ...)",
            &|y| format!("{y:.0}"),
        )?;
        for (k, (_, rgb)) in CPU_PARTS.into_iter().enumerate() {
            let color = RGBColor(rgb.0, rgb.1, rgb.2);
            let mut rects = Vec::new();
            for (i, row) in cpus.iter().enumerate() {
                let m = row.len().max(1) as f64;
                let w = 0.8 / m;
                for (j, c) in row.iter().enumerate() {
                    let s = &c.split;
                    let vals = [s.usr, s.sys, s.soft + s.irq, s.idle + s.steal];
                    let base: f64 = vals[..k].iter().sum();
                    let x0 = i as f64 - 0.4 + j as f64 * w;
                    rects.push(Rectangle::new(
                        [(x0 + 0.02, base), (x0 + w - 0.02, base + vals[k])],
                        color.filled(),
                    ));
                }
            }
            chart.draw_series(rects).map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Round-trip latency at p50 .. p99.99 for each row, log scale.
pub fn latency_lines(names: &[String], latency: &[Latency]) -> LabResult<String> {
    const TICKS: [&str; 5] = ["p50", "p90", "p99", "p99.9", "p99.99"];
    let series: Vec<(String, Vec<(f64, f64)>)> = names
        .iter()
        .zip(latency)
        .map(|(name, l)| {
            let pts = [l.p50, l.p90, l.p99, l.p999, l.p9999]
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.filter(|v| *v > 0.0).map(|v| (i as f64, v)))
                .collect();
            (name.clone(), pts)
        })
        .collect();
    let names: Vec<String> = TICKS.iter().map(|s| s.to_string()).collect();
    let fmt = |x: &f64| label(&names, *x);
    log_lines(
        "Round-trip latency by percentile",
        &series,
        -0.2..4.2,
        "",
        5,
        &fmt,
    )
}

/// Lines of points, y on a log scale of whole decades, legend in the upper left.
fn log_lines(
    title: &str,
    series: &[(String, Vec<(f64, f64)>)],
    x: std::ops::Range<f64>,
    x_desc: &str,
    x_labels: usize,
    x_fmt: &dyn Fn(&f64) -> String,
) -> LabResult<String> {
    let all = series.iter().flat_map(|(_, p)| p.iter().map(|x| x.1));
    let (lo, hi) = all.fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    // Whole decades, so the log axis always has labelled ticks.
    let (lo, hi) = if hi > 0.0 {
        (
            10f64.powf(lo.log10().floor()),
            10f64.powf(hi.log10().ceil()),
        )
    } else {
        (1.0, 10.0)
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (540, 400)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x, (lo..hi).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_labels(x_labels)
            .x_label_formatter(x_fmt)
            .x_desc(x_desc)
            .y_desc("microseconds (log)")
            .y_label_formatter(&|y| super::num(*y))
            .draw()
            .map_err(err)?;
        for (i, (name, pts)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                .map_err(err)?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}
