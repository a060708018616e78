# rake lesson (tools/lesson/lesson.rb) with short phases: it prints the
# dashboard's URL, announces its phases on the page, and writes a
# self-contained report that a browser draws without the server, with
# Little's law beside each measurement.
require 'json'
require 'open3'
require_relative 'spec_helper'
require_relative '../tools/lesson/chromium'

RSpec.describe 'rake lesson' do
  # The charts the dashboard defines (its CHARTS list), each drawn in the report.
  def dashboard_charts
    page = File.read(File.join(GatewaySpec::ROOT, 'gateway/handler/status/dashboard.html'))
    page[/^const CHARTS = \[\n(.*?)^\];/m, 1].scan(/^  \{ id: "/).size
  end

  it 'runs the three phases, announces them, and writes a self-contained report' do
    out_dir = File.join(spec_dir, 'lesson')
    env = { 'LESSON_PHASE_SECONDS' => '2', 'LESSON_SCREENSHOTS' => '0', 'LESSON_OUT' => out_dir,
            'LESSON_ASYNC_CLIENTS' => '5', 'LESSON_BLOCKING_CLIENTS' => '2',
            'GATEWAY_BIN' => GatewaySpec::BIN }
    out, st = Open3.capture2e(env, 'ruby', File.join(GatewaySpec::ROOT, 'tools/lesson/lesson.rb'))
    expect(st.success?).to be(true), out
    expect(out).to match(%r{the dashboard is at http://127\.0\.0\.1:\d+/dashboard})
    report = File.read(File.join(out_dir, 'report.html'))
    expect(report).not_to match(%r{(src|href)="https?://}) # self-contained
    data = JSON.parse(report[/window\.GATEWAY_REPLAY = (.*?);<\/script>/m, 1])
    # the page saw each phase announced (its polls carry the note)
    notes = data['samples'].map { |s| s['stats']['note'] }.uniq
    expect(notes.grep(/\Aphase \d of 3/).size).to eq(3)
    expect(data['phases'].map { |p| p['title'] }).to match([/alone/, /Phase 1: non-blocking/, /Phase 2: blocking/,
                                                             /Phase 3: both/])
    # the blocking phases saw the loop blocked; the non-blocking one did not
    blocked = lambda do |p|
      front = p['timeline']['workers'].max_by { |w| w['cols'].sum { |c| c[3] } }
      front['cols'].sum { |c| c[3] } / front['cols'].size / 10.0 # percent
    end
    p1, p2, p3 = data['phases'][1..]
    expect(blocked.call(p1)).to eq(0)
    expect(blocked.call(p2)).to be > 40
    expect(blocked.call(p3)).to be > 40
    expect(p3['traces'].size).to eq(2)
    # Little's law beside each measurement
    expect(p2['html']).to include('Little: C / W').and include('X = 1 / S')

    Chromium.open(File.join(spec_dir, 'chromium')) do |c|
      c.goto("file://#{File.join(out_dir, 'report.html')}")
      sleep 1
      dom = c.dom
      expect(c.errors).to eq([])
      expect(dom).to match(%r{<div id="errors"></div>})
      expect(dom.scan(/<svg class="chart"/).size).to eq(dashboard_charts) # every chart the page defines
      expect(dom.scan(/data-points="(\d+)"/).flatten.map(&:to_i).max).to be >= 5
      expect(dom.scan(/<svg class="waterfall"/).size).to eq(6) # 2 alone, 1 + 1 + 2
      expect(dom.scan(/<svg class="timeline"/).size).to be >= 3
      expect(dom).to include('blocked the loop for')
    end
  end
end
