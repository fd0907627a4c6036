//! The terminal view: ratatui draws the model's lines (header, view, key help), crossterm
//! reads keys. The terminal is restored on every way out, a panic included.

use std::io::Stdout;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::terminal::{disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::ExecutableCommand;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style, Stylize};
use ratatui::text::Line as TextLine;
use ratatui::widgets::Paragraph;
use ratatui::{Frame, Terminal};

use super::model::{Action, Key, Model};
use super::text::{self, Line};
use super::Poller;

/// Polls and draws until a key asks to quit.
pub fn run(model: &mut Model, poller: &mut Poller, interval: Duration) -> anyhow::Result<()> {
    let mut terminal = enter()?;
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        leave();
        previous_hook(info);
    }));
    let result = event_loop(&mut terminal, model, poller, interval);
    leave();
    result
}

fn enter() -> anyhow::Result<Terminal<CrosstermBackend<Stdout>>> {
    enable_raw_mode()?;
    std::io::stdout().execute(EnterAlternateScreen)?;
    let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    terminal.hide_cursor()?;
    Ok(terminal)
}

/// Gives the terminal back as it was (safe to call twice).
fn leave() {
    let _ = disable_raw_mode();
    let _ = std::io::stdout().execute(LeaveAlternateScreen);
    let _ = std::io::stdout().execute(crossterm::cursor::Show);
}

fn event_loop(
    terminal: &mut Terminal<CrosstermBackend<Stdout>>,
    model: &mut Model,
    poller: &mut Poller,
    interval: Duration,
) -> anyhow::Result<()> {
    let mut next_poll = Instant::now();
    let mut error: Option<String> = None;
    loop {
        if Instant::now() >= next_poll {
            error = poller.poll(model).err().map(|e| format!("{e:#}"));
            next_poll = Instant::now() + interval;
        }
        terminal.draw(|frame| draw(frame, model, error.as_deref()))?;
        if !event::poll(next_poll.saturating_duration_since(Instant::now()))? {
            continue;
        }
        let Event::Key(key) = event::read()? else { continue };
        if key.kind != KeyEventKind::Press {
            continue;
        }
        let Some(key) = key_of(key) else { continue };
        match model.key(key) {
            Action::Quit => return Ok(()),
            Action::Refetch => next_poll = Instant::now(),
            Action::Redraw => {}
        }
    }
}

fn key_of(event: KeyEvent) -> Option<Key> {
    Some(match event.code {
        KeyCode::Char('c') if event.modifiers.contains(KeyModifiers::CONTROL) => Key::Interrupt,
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        _ => return None,
    })
}

fn draw(frame: &mut Frame<'_>, model: &Model, error: Option<&str>) {
    let width = frame.area().width as usize;
    let header: Vec<String> = match error {
        Some(error) => vec![format!("histd top: {error}")],
        None => model.header(),
    };
    let [top, body, bottom] =
        Layout::vertical([Constraint::Length(header.len() as u16 + 1), Constraint::Min(1), Constraint::Length(1)])
            .areas(frame.area());
    let header: Vec<TextLine<'_>> = header.into_iter().map(|t| TextLine::from(text::fit(&t, width))).collect();
    frame.render_widget(Paragraph::new(header), top);
    let lines = text::body(model, width);
    let scroll = scroll_for(&lines, body.height as usize);
    let styled: Vec<TextLine<'_>> = lines.iter().skip(scroll).map(styled).collect();
    frame.render_widget(Paragraph::new(styled), body);
    frame.render_widget(Paragraph::new(text::fit(&text::help(model), width)).reversed(), bottom);
}

/// The first line to show so that the selected row stays on screen.
fn scroll_for(lines: &[Line], height: usize) -> usize {
    let selected = lines.iter().position(|line| line.selected).unwrap_or(0);
    (selected + 1).saturating_sub(height)
}

fn styled(line: &Line) -> TextLine<'static> {
    let mut style = Style::default();
    if line.heading {
        style = style.add_modifier(Modifier::BOLD);
    }
    if line.alert {
        style = style.yellow().add_modifier(Modifier::BOLD);
    }
    if line.selected {
        style = style.add_modifier(Modifier::REVERSED);
    }
    TextLine::styled(line.text.clone(), style)
}
