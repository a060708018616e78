# rake lesson: the blocking vs non-blocking experiment (tools/lesson/lesson.rb,
# docs/lesson.md).
desc 'The lesson: examples/async.rb under three phases of load (non-blocking, blocking, both; ' \
     'LESSON_PHASE_SECONDS=20 each), announced on its dashboard; writes build/lesson/report.html'
task lesson: :build do
  ruby 'tools/lesson/lesson.rb'
end
