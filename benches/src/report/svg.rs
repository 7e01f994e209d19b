//! The report's charts, drawn with `plotters` as SVG (text as `<text>` elements: no font
//! libraries needed). Log axes are drawn as linear axes over log10 of the values, labelled with
//! the values themselves.

use plotters::prelude::*;

/// One line of a chart: a name and `(x, y)` points (positive where the axis is logarithmic).
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Points, in increasing `x`.
    pub points: Vec<(f64, f64)>,
}

/// A chart of a workload, written next to the report as `file`.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// File name, e.g. `w4-growth.svg`.
    pub file: &'static str,
    /// Caption.
    pub title: String,
    /// Axis descriptions.
    pub x_label: String,
    /// Axis descriptions.
    pub y_label: String,
    /// Logarithmic axes.
    pub log_x: bool,
    /// Logarithmic axes.
    pub log_y: bool,
    /// Lines, one per implementation.
    pub series: Vec<Series>,
}

/// `v` on an axis: log10 of it on a logarithmic one.
fn axis(v: f64, log: bool) -> f64 {
    if log {
        v.max(f64::MIN_POSITIVE).log10()
    } else {
        v
    }
}

/// The label of axis position `v`.
fn label(v: f64, log: bool) -> String {
    let x = if log { 10f64.powf(v) } else { v };
    // Two significant digits at most: a log axis's ticks fall between decades too.
    let short = |x: f64| {
        if x >= 10.0 {
            format!("{:.0}", x)
        } else if x >= 1.0 {
            format!("{}", (x * 10.0).round() / 10.0)
        } else {
            format!("{}", (x * 100.0).round() / 100.0)
        }
    };
    if x >= 1e6 {
        format!("{}M", short(x / 1e6))
    } else if x >= 1e3 {
        format!("{}k", short(x / 1e3))
    } else {
        short(x)
    }
}

/// The range an axis shows for `values`: whole decades on a log axis, from 0 on a linear one.
fn range(values: impl Iterator<Item = f64>, log: bool) -> std::ops::Range<f64> {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    if lo > hi {
        return 0.0..1.0;
    }
    if log {
        lo.floor()..hi.ceil().max(lo.floor() + 1.0)
    } else {
        0f64.min(lo)..hi * 1.1 + f64::EPSILON
    }
}

/// The chart as an SVG document.
///
/// # Errors
///
/// If plotters fails to draw it (the message says why).
pub fn render(chart: &Chart) -> Result<String, String> {
    let mut svg = String::new();
    draw(chart, &mut svg).map_err(|e| format!("{}: {e}", chart.file))?;
    Ok(svg)
}

fn draw<'a>(chart: &Chart, svg: &'a mut String) -> Result<(), Box<dyn std::error::Error + 'a>> {
    let root = SVGBackend::with_string(svg, (800, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let (lx, ly) = (chart.log_x, chart.log_y);
    let points = || chart.series.iter().flat_map(|s| s.points.iter().copied());
    let xs = range(points().map(|(x, _)| axis(x, lx)), lx);
    let ys = range(points().map(|(_, y)| axis(y, ly)), ly);
    // On a log axis, a label per decade.
    let labels = |r: &std::ops::Range<f64>, log: bool| {
        if log {
            (r.end - r.start) as usize + 1
        } else {
            10
        }
    };
    let (nx, ny) = (labels(&xs, lx), labels(&ys, ly));
    let mut c = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(xs, ys)?;
    c.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .x_labels(nx)
        .y_labels(ny)
        .x_label_formatter(&|v| label(*v, lx))
        .y_label_formatter(&|v| label(*v, ly))
        .draw()?;
    for (i, s) in chart.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|&(x, y)| (axis(x, lx), axis(y, ly)))
            .collect();
        c.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
            .label(s.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        c.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_renders_with_its_labels_and_lines() {
        let chart = Chart {
            file: "t.svg",
            title: "W4 growth".to_owned(),
            x_label: "N".to_owned(),
            y_label: "ns".to_owned(),
            log_x: true,
            log_y: true,
            series: vec![Series {
                name: "ours".to_owned(),
                points: vec![(1e4, 50.0), (1e6, 80.0)],
            }],
        };
        let svg = render(&chart).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("W4 growth") && svg.contains("ours"));
        assert!(svg.contains("<polyline"), "a line is drawn");
        assert_eq!(label(4.0, true), "10k");
        assert_eq!(label(6.0, true), "1M");
    }
}
