# include "conf.d/*.rb": evaluates other config files where it stands, as
# if their text were written there (nginx's include). The pattern is a file
# or a glob(3) pattern, relative to the folder of the file that includes it;
# a glob's files are read in sorted order, a glob matching nothing is fine,
# a file named literally must exist. An error inside an included file names
# that file and its line (config_load.c looks for any of Config.files in the
# backtrace); a file that includes itself, directly or not, is refused.
module Gateway
  class Config
    class << self
      attr_reader :file

      # Every config file read so far, the main one first: an error's
      # FILE:LINE is the innermost frame in one of them.
      def files
        @files ||= []
      end
    end

    # The core sets the main file before each load (start-up, reload).
    def self.file=(path)
      @file = path
      @files = path ? [path] : []
      @including = path ? [[path, Gateway._realpath(path) || path]] : []
    end

    # The core calls it once the main file has run: from then on (a
    # handler, at request time) include has no file to be relative to.
    def self.file_read
      @including = []
    end

    GLOB_CHARS = "*?["

    def self.include_files(pattern)
      unless pattern.is_a?(String) && !pattern.empty? && !pattern.include?("\0")
        raise ArgumentError, "include: give a file or a glob like \"conf.d/*.rb\", got #{pattern.inspect}"
      end
      stack = @including || []
      raise ArgumentError, "include: only while a config file is read, at its top level" if stack.empty?
      cur = stack.last[0]
      path = pattern.start_with?("/") || !cur.include?("/") ? pattern : cur[0, cur.rindex("/") + 1] + pattern
      if pattern.chars.any? { |c| GLOB_CHARS.include?(c) }
        paths = Gateway._glob(path)
      else
        raise ArgumentError, "include: no file #{path}" unless Gateway._file?(path)
        paths = [path]
      end
      paths.each do |f|
        real = Gateway._realpath(f) || f
        if stack.any? { |_, r| r == real }
          chain = (stack.map { |p, _| p } + [f]).join(" -> ")
          raise ArgumentError, "include: #{f} is already being read (an include cycle: #{chain})"
        end
        stack << [f, real]
        files << f unless files.include?(f)
        begin
          Gateway._load_config_file(f)
        ensure
          stack.pop
        end
      end
      paths
    end
  end
end

# include "conf.d/*.rb"          # every .rb file of conf.d/, sorted
# include "/etc/gateway/upstreams.rb"
# include SomeModule             # Modules: Ruby's own include (into Object)
# Defined on the top-level object (mruby-toplevel-ext gives it an include
# for Modules only) and, for the error inside a server block, on Object.
def self.include(*args)
  return Object.include(*args) if !args.empty? && args.all? { |a| a.is_a?(Module) }
  raise ArgumentError, "include: give one file or glob, got #{args.size} arguments" unless args.size == 1
  Gateway::Config.include_files(args[0])
end

def include(pattern)
  return Object.include(pattern) if pattern.is_a?(Module)
  Gateway::Config.top_level!("include", self)
  Gateway::Config.include_files(pattern)
end
